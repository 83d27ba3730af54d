#include "engine/src/admission/admission_policy_predictor.h"

#include <cmath>

namespace spawnpool::detail {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

}  // namespace

std::uint64_t PeakHistogram::bucket_edge(int index) {
  return static_cast<std::uint64_t>(std::ceil(kMiB * std::exp2(index / 4.0)));
}

void PeakHistogram::add(std::uint64_t bytes) {
  // The first bucket whose upper edge holds `bytes`; the log only gives the start.
  const double value = static_cast<double>(bytes);
  int index = value <= kMiB ? 0 : static_cast<int>(std::ceil(4.0 * std::log2(value / kMiB)));
  if (index < 0) index = 0;
  if (index >= kBuckets) index = kBuckets - 1;
  while (index + 1 < kBuckets && bucket_edge(index) < bytes) ++index;
  while (index > 0 && bucket_edge(index - 1) >= bytes) --index;
  ++counts_[static_cast<std::size_t>(index)];
  ++count_;
}

std::uint64_t PeakHistogram::quantile(double fraction) const {
  if (count_ == 0) return 0;
  std::uint64_t rank = static_cast<std::uint64_t>(std::ceil(fraction * static_cast<double>(count_)));
  if (rank < 1) rank = 1;
  if (rank > count_) rank = count_;
  std::uint64_t seen = 0;
  for (int index = 0; index < kBuckets; ++index) {
    seen += counts_[static_cast<std::size_t>(index)];
    if (seen >= rank) return bucket_edge(index);
  }
  return bucket_edge(kBuckets - 1);
}

PeakPredictor::PeakPredictor(HistorySnapshot history, PredictorOptions options)
    : history_(std::move(history)), options_(options) {}

Prediction PeakPredictor::predict(const CommandKey& key, std::uint64_t default_bytes) const {
  // This build's own measurement is fresher than the history's.
  if (const auto it = exact_seen_.find(key.exact); it != exact_seen_.end())
    return {it->second, PredictionSource::kExact};
  // A history entry of peak 0 has a duration only (it ran without admission).
  if (const HistoryEntry* entry = history_.find_exact(key.exact); entry && entry->peak_bytes > 0)
    return {static_cast<std::uint64_t>(entry->peak_bytes), PredictionSource::kExact};
  if (key.fallback != 0) {
    if (const auto it = fallback_seen_.find(key.fallback); it != fallback_seen_.end())
      return {it->second, PredictionSource::kFallback};
    if (const HistoryEntry* entry = history_.find_fallback(key.fallback);
        entry && entry->peak_bytes > 0)
      return {static_cast<std::uint64_t>(entry->peak_bytes), PredictionSource::kFallback};
  }
  if (const auto it = by_program_.find(key.program);
      it != by_program_.end() && it->second.count() >= options_.min_samples)
    return {it->second.quantile(options_.learned_quantile), PredictionSource::kProgram};
  if (all_.count() >= options_.min_samples)
    return {all_.quantile(options_.learned_quantile), PredictionSource::kBuild};
  return {default_bytes, PredictionSource::kDefault};
}

void PeakPredictor::observe(const CommandKey& key, std::uint64_t peak_bytes) {
  if (peak_bytes == 0) return;
  exact_seen_[key.exact] = peak_bytes;
  if (key.fallback != 0) fallback_seen_[key.fallback] = peak_bytes;
  by_program_[key.program].add(peak_bytes);
  all_.add(peak_bytes);
}

}  // namespace spawnpool::detail
