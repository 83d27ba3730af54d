#include "engine/src/progress/duration_fit.h"

#include <algorithm>

namespace spawnpool::detail {
namespace {

// How far beyond the predictions it was fitted to the line holds (a factor). Within twice
// the longest, a prediction may carry the last build's load rather than a longer command
// (the history's ratio to this build moved 0.75-1.30x between the ETA benchmark's
// builds, and a prediction is mostly the command's last duration); beyond, it names a
// longer command, which the line (flat for alike commands) would take for a short one.
constexpr double kReach = 2;

}  // namespace

void DurationFit::add(double predicted_s, double actual_s) {
  ++count_;
  sum_p_ += predicted_s;
  sum_a_ += actual_s;
  sum_pp_ += predicted_s * predicted_s;
  sum_pa_ += predicted_s * actual_s;
  sum_aa_ += actual_s * actual_s;
  min_p_ = std::min(min_p_, predicted_s);
  max_p_ = std::max(max_p_, predicted_s);
}

DurationLine DurationFit::line() const {
  if (count_ == 0 || sum_p_ <= 0) return {};
  const double n = static_cast<double>(count_);
  const double mean_p = sum_p_ / n, mean_a = sum_a_ / n;
  const double r = mean_a / mean_p;
  // The ratio is the line through 0 everywhere: no range to keep to.
  const DurationLine ratio{0, r, 0, std::numeric_limits<double>::infinity(), r};
  const double var_p = sum_pp_ / n - mean_p * mean_p;
  // Predictions that (nearly) all agree say nothing of a slope.
  if (count_ < 3 || var_p <= 1e-6 * mean_p * mean_p) return ratio;
  const double cov = sum_pa_ / n - mean_p * mean_a;
  const double var_a = std::max(0.0, sum_aa_ / n - mean_a * mean_a);
  const double least_squares = cov / var_p;
  // The slope's squared standard error: the residual variance over n x var(predicted).
  const double residual = std::max(0.0, var_a - cov * least_squares);
  const double error2 = residual / (n * var_p);
  const double departure = least_squares - ratio.slope;
  if (departure == 0) return ratio;
  const double kept = std::max(0.0, 1 - error2 / (departure * departure));
  const double slope = std::clamp(ratio.slope + kept * departure, 0.0, 2 * ratio.slope);
  const double intercept = mean_a - slope * mean_p;
  // A line below zero for short commands: the ratio is the better guess there.
  if (intercept < 0) return ratio;
  return {intercept, slope, min_p_ / kReach, max_p_ * kReach, r};
}

}  // namespace spawnpool::detail
