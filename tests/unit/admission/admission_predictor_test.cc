// Peak predictions: the order of sources (this build's measurement, the history's exact
// key, the fallback key, the same program in this build, any command in this build, the
// default) and the quarter-octave histogram behind the learned estimates.
#include <catch2/catch.hpp>

#include "engine/src/admission/admission_policy_predictor.h"

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;

CommandKey key(std::uint64_t exact, std::uint64_t fallback, std::uint64_t program) {
  CommandKey k;
  k.exact = exact;
  k.fallback = fallback;
  k.program = program;
  return k;
}

TEST_CASE("the histogram's quantiles are at most a bucket above the true ones",
          "[memory][predictor]") {
  CHECK(PeakHistogram::bucket_edge(0) == kMiB);
  CHECK(PeakHistogram::bucket_edge(4) == 2 * kMiB);
  CHECK(PeakHistogram::bucket_edge(40) == 1024 * kMiB);
  for (int i = 1; i < 96; ++i) CHECK(PeakHistogram::bucket_edge(i) > PeakHistogram::bucket_edge(i - 1));

  PeakHistogram histogram;
  CHECK(histogram.quantile(0.9) == 0);
  const std::uint64_t value = GENERATE(std::uint64_t(1), 512 * 1024, kMiB, kMiB + 1, 100 * kMiB,
                                       1536 * kMiB, 3 * (std::uint64_t(1) << 40));
  histogram.add(value);
  CAPTURE(value);
  CHECK(histogram.quantile(0.9) >= value);
  CHECK(histogram.quantile(0.9) <= std::max(kMiB, value + value / 5));
}

TEST_CASE("p90 of 1..100 MiB is about 90 MiB", "[memory][predictor]") {
  PeakHistogram histogram;
  for (std::uint64_t mib = 1; mib <= 100; ++mib) histogram.add(mib * kMiB);
  CHECK(histogram.count() == 100);
  CHECK(histogram.quantile(0.9) >= 90 * kMiB);
  CHECK(histogram.quantile(0.9) <= 108 * kMiB);
  CHECK(histogram.quantile(1.0) >= 100 * kMiB);
  CHECK(histogram.quantile(0.0) == kMiB);  // the lowest bucket with a value
}

TEST_CASE("predictions go: this build, history exact, fallback, program, build, default",
          "[memory][predictor]") {
  HistorySnapshot history;
  history.add(1, 10, {100 * kMiB, 1});
  history.add(2, 20, {200 * kMiB, 1});
  PeakPredictor predictor(std::move(history), PredictorOptions{});
  const std::uint64_t fallback_default = 1000 * kMiB;
  const auto predict = [&](const CommandKey& k) { return predictor.predict(k, fallback_default); };

  // The history, by exact key then by fallback key.
  CHECK(predict(key(1, 10, 5)).bytes == 100 * kMiB);
  CHECK(predict(key(1, 10, 5)).source == PredictionSource::kExact);
  CHECK(predict(key(3, 20, 5)).bytes == 200 * kMiB);
  CHECK(predict(key(3, 20, 5)).source == PredictionSource::kFallback);
  CHECK(predict(key(3, 0, 5)).source == PredictionSource::kDefault);
  CHECK(predict(key(3, 0, 5)).bytes == fallback_default);

  // This build's measurements win over the history's.
  predictor.observe(key(1, 10, 5), 150 * kMiB);
  CHECK(predict(key(1, 10, 5)).bytes == 150 * kMiB);
  CHECK(predict(key(4, 10, 5)).bytes == 150 * kMiB);  // same fallback key, measured now
  CHECK(predict(key(4, 10, 5)).source == PredictionSource::kFallback);

  // Program 5 has one measurement: not enough to trust (min_samples 3).
  CHECK(predict(key(6, 0, 5)).source == PredictionSource::kDefault);
  predictor.observe(key(7, 0, 5), 40 * kMiB);
  predictor.observe(key(8, 0, 5), 60 * kMiB);
  const Prediction learned = predict(key(9, 0, 5));
  CHECK(learned.source == PredictionSource::kProgram);
  CHECK(learned.bytes >= 150 * kMiB);  // p90 of {40, 60, 150}: the largest
  CHECK(learned.bytes <= 180 * kMiB);

  // A program never seen gets what any command of this build took.
  const Prediction build = predict(key(10, 0, 99));
  CHECK(build.source == PredictionSource::kBuild);
  CHECK(build.bytes >= 150 * kMiB);
  CHECK(predictor.history_size() == 2);
}

TEST_CASE("a peak of 0 teaches nothing", "[memory][predictor]") {
  PeakPredictor predictor(HistorySnapshot{}, PredictorOptions{});
  for (int i = 0; i < 5; ++i) predictor.observe(key(1, 2, 3), 0);
  CHECK(predictor.predict(key(1, 2, 3), 77).source == PredictionSource::kDefault);
  CHECK(predictor.predict(key(1, 2, 3), 77).bytes == 77);
}

}  // namespace
}  // namespace spawnpool::detail
