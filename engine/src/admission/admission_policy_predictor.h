// Peak-memory predictions for admission: the command's own measurement (this build's,
// else the history's), then the history's fallback key (a flag changed), then what the
// same program took in this build (a high quantile), then what any command took, then a
// conservative default. Not thread-safe: owned by AdmissionPolicy and called under the
// scheduler's lock; a prediction is a few hash lookups, no I/O.
#pragma once

#include <array>
#include <cstdint>
#include <unordered_map>

#include "engine/src/history/history_store_key.h"
#include "engine/src/history/history_store_snapshot.h"

namespace spawnpool::detail {

/// Where a prediction came from (for stats and tests).
enum class PredictionSource : std::uint8_t {
  kExact,     ///< this very command was measured (in this build, or in the history)
  kFallback,  ///< the same program writing the same output was (a flag changed)
  kProgram,   ///< learned: other commands of the same program in this build
  kBuild,     ///< learned: all commands of this build
  kDefault,   ///< nothing known yet
};

struct Prediction {
  std::uint64_t bytes = 0;
  PredictionSource source = PredictionSource::kDefault;
};

/// Peaks in buckets a quarter octave wide (each edge 19% above the last, from 1 MiB), so
/// a quantile costs O(buckets) and nothing per value is kept.
class PeakHistogram {
 public:
  void add(std::uint64_t bytes);
  std::uint64_t count() const { return count_; }
  /// The upper edge of the bucket holding the `fraction` quantile: at least that
  /// quantile, at most 19% above it. 0 when empty.
  std::uint64_t quantile(double fraction) const;
  /// The upper edge of bucket `index`.
  static std::uint64_t bucket_edge(int index);

 private:
  static constexpr int kBuckets = 96;  // the last edge is 2^24 MiB
  std::array<std::uint32_t, kBuckets> counts_{};
  std::uint64_t count_ = 0;
};

struct PredictorOptions {
  /// Which quantile of similar commands' peaks an unknown command is given. 0.9 rather
  /// than the maximum: one outlier (a link among compiles, same program) then does not
  /// hold back every later command of that program; the tenth that is underestimated is
  /// what the pressure gate and the OOM retry are for.
  double learned_quantile = 0.9;
  /// Measurements of similar commands needed before they are trusted over the default.
  std::uint64_t min_samples = 3;
};

class PeakPredictor {
 public:
  PeakPredictor(HistorySnapshot history, PredictorOptions options);

  /// The predicted peak of `key`; `default_bytes` when nothing is known.
  Prediction predict(const CommandKey& key, std::uint64_t default_bytes) const;
  /// Learns a measured peak (bytes > 0) of a command that ran in this build.
  void observe(const CommandKey& key, std::uint64_t peak_bytes);

  std::size_t history_size() const { return history_.size(); }

 private:
  HistorySnapshot history_;
  PredictorOptions options_;
  std::unordered_map<std::uint64_t, std::uint64_t> exact_seen_;     // this build, latest
  std::unordered_map<std::uint64_t, std::uint64_t> fallback_seen_;  // this build, latest
  std::unordered_map<std::uint64_t, PeakHistogram> by_program_;     // this build
  PeakHistogram all_;                                               // this build
};

}  // namespace spawnpool::detail
