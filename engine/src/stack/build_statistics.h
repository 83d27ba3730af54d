// Build statistics: what the commands cost, what the pool cost, how busy the slots were,
// as the end-of-build report text of engine/python/spawnpool/stats.py (Stats.report), the
// same lines and figures. Constant memory per build: running sums, the ten longest
// commands, and a histogram of 1% buckets for the memory prediction error. Times come
// from the results (CLOCK_MONOTONIC):
//
// - command time: launch start (or child start) to reap (command_ns() below);
// - pool overhead: slot to launch plus reap to result (pool_overhead_ns() below);
// - queue wait: submit to dispatch; slot utilization: command time / (slots x build
//   wall), the wall from the first submit to the last result;
// - with memory admission (predicted_peak_bytes set): what measured the peaks, the
//   commands delayed for memory and their delay, OOM retries, the prediction error
//   |predicted - measured| / measured at p50 and p90.
//
// Thread-safe: one lock around the sums, held only for the additions.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "spawnpool/result.h"

namespace spawnpool::detail {

/// The command's own time: from the start of its launch (clone and exec, which any way of
/// spawning pays) to its reap.
std::int64_t command_ns(const Result& result);
/// What the pool added: slot to launch, and reap to the result in the caller's hands.
std::int64_t pool_overhead_ns(const Result& result);
/// What measured a peak, as the statistics and the build report name it; "" for none.
const char* memory_mode_name(MemorySource source);
/// Its name as spawnpool.Result.memory_source and the trace's args have it ("cgroup",
/// "cgroup_sampled", "rusage"); "" for none.
const char* memory_source_name(MemorySource source);

/// The sums so far, read at once.
struct StatisticsTotals {
  int slots = 0;
  std::int64_t commands = 0;   ///< recorded, started or not
  std::int64_t failed = 0;     ///< non-zero status, or never started
  std::int64_t unstarted = 0;
  std::int64_t command_ns = 0;
  std::int64_t overhead_ns = 0;
  std::int64_t queue_ns = 0;
  double build_wall_s = 0;     ///< first submit to last result; 0 before any command
  double utilization = 0;      ///< share of the slots' time running commands, 0..1
};

class BuildStatistics {
 public:
  explicit BuildStatistics(int slots = 0) : slots_(slots) {}

  /// The most slots the pool had (a resize can change it).
  void note_slots(int slots);
  /// Records one command's result; `line`: its command line, for the longest list.
  void add(const Result& result, const std::string& line);
  StatisticsTotals totals() const;
  /// The statistics as text, one line per figure, each ending in '\n'.
  std::string report(const std::string& prefix = "spawnpool") const;
  /// The prediction error (percent of the measured peak) at quantile `fraction`; none
  /// before any prediction met its measurement.
  std::optional<int> prediction_error(double fraction) const;
  /// [(seconds, line)] of the longest commands, longest first.
  std::vector<std::pair<double, std::string>> longest() const;

 private:
  struct Longest {
    std::int64_t ns;
    std::uint64_t seq;
    std::string line;
  };
  static constexpr std::size_t kLongest = 10;
  static constexpr int kErrorBuckets = 1001;  // whole percent; the last holds >= 1000%

  void add_unstarted_locked(std::int64_t when_ns);
  void add_memory_locked(const Result& result);
  void span_locked(std::int64_t start_ns, std::int64_t end_ns);
  std::optional<int> error_locked(double fraction) const;
  double build_wall_locked() const;
  double utilization_locked() const;
  std::vector<std::pair<double, std::string>> longest_locked() const;

  mutable std::mutex mutex_;
  int slots_;
  std::int64_t commands_ = 0;   // recorded, started or not
  std::int64_t failed_ = 0;     // non-zero status, or never started
  std::int64_t unstarted_ = 0;
  std::int64_t command_ns_ = 0;
  std::int64_t overhead_ns_ = 0;
  std::int64_t queue_ns_ = 0;
  std::optional<std::int64_t> first_ns_;  // earliest submit
  std::optional<std::int64_t> last_ns_;   // latest completion
  std::vector<Longest> longest_;          // min-heap on (ns, seq)
  std::uint64_t seq_ = 0;
  // Memory admission: counted only for results that carry a prediction.
  std::int64_t predicted_ = 0;  // with a prediction and a measured peak
  std::int64_t under_predicted_ = 0;
  std::int64_t delayed_ = 0;    // waited for memory with a slot free
  std::int64_t memory_wait_ns_ = 0;
  std::int64_t oom_retries_ = 0;
  std::int64_t oom_failed_ = 0;  // killed again when run alone
  std::vector<std::int64_t> errors_;  // count per whole percent, once needed
  std::string memory_mode_;           // of the first measured command
};

}  // namespace spawnpool::detail
