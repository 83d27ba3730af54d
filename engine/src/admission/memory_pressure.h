// Live memory feedback for admission: the kernel's pressure stall information (PSI,
// `some avg10` of /proc/pressure/memory or a cgroup's memory.pressure), and a gate that
// pauses admissions while it is high, with hysteresis, polled at a bounded rate. Not
// thread-safe: the admission policy calls it under the scheduler's lock.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/src/admission/memory_proc_file.h"

namespace spawnpool::detail {

/// `avg10` of the `some` line of a PSI text ("some avg10=1.23 avg60=... total=..."),
/// a percentage of wall time in which some task stalled on memory; unset if absent.
std::optional<double> parse_psi_some_avg10(std::string_view psi);

/// Where memory pressure is read from.
class PressureSource {
 public:
  virtual ~PressureSource() = default;
  /// `some avg10` now, in percent; unset when it cannot be read.
  virtual std::optional<double> some_avg10() = 0;
};

/// PressureSource reading a PSI file (kept open: one pread per reading).
class PsiFile : public PressureSource {
 public:
  explicit PsiFile(std::string path) : file_(std::move(path)) {}
  std::optional<double> some_avg10() override;
  const std::string& path() const { return file_.path(); }

 private:
  ProcFile file_;
};

/// The PSI file for a pool: `cgroup_file` (the driver's cgroup's memory.pressure, from
/// memory_pressure_file() in cgroup_limits.h) when it reads, else /proc/pressure/memory;
/// null when neither reads (a kernel without PSI): admission then goes by the budget alone.
std::unique_ptr<PsiFile> open_memory_pressure(const std::string& cgroup_file);

struct PressureThresholds {
  /// Pause admissions once `some avg10` is above this (percent)...
  double pause_above = 10.0;
  /// ... and admit again once it is below this.
  double resume_below = 5.0;
  /// Read the source at most this often. The kernel recomputes avg10 every 2 s, so a
  /// faster poll would mostly read the same number.
  std::int64_t poll_interval_ns = 500'000'000;
};

class PressureGate {
 public:
  /// `source` may be null: the gate is then always open.
  PressureGate(std::unique_ptr<PressureSource> source, PressureThresholds thresholds);

  /// Whether admissions are paused at `now_ns` (CLOCK_MONOTONIC). Reads the source if the
  /// last reading is older than the poll interval; an unreadable source opens the gate
  /// (a missing PSI file must not stall a build).
  bool paused(std::int64_t now_ns);
  /// When a reading could change the answer: the next poll time; unset without a source.
  std::optional<std::int64_t> next_poll_ns() const;

  /// The last reading (percent), if any.
  std::optional<double> last_avg10() const { return last_avg10_; }
  /// How many times admissions were paused, and for how long in all (up to `now_ns`).
  std::uint64_t pauses() const { return pauses_; }
  std::int64_t paused_ns(std::int64_t now_ns) const;

 private:
  std::unique_ptr<PressureSource> source_;
  PressureThresholds thresholds_;
  std::optional<double> last_avg10_;
  std::int64_t last_poll_ns_ = 0;
  bool polled_ = false;
  bool paused_ = false;
  std::int64_t paused_since_ns_ = 0;
  std::int64_t paused_total_ns_ = 0;  // of the pauses that ended
  std::uint64_t pauses_ = 0;
};

}  // namespace spawnpool::detail
