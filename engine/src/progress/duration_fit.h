// How this build's commands' durations follow the durations predicted for them (the
// history's, or their program's median in this build): a straight line fitted to the
// finished commands, which the ETA puts every prediction through (issue 18).
//
// The history's durations come from other builds, under another load: they are right up
// to a factor when commands differ in size (a 12 s compile beside 0.1 s ones), and little
// more than noise when commands are alike (each duration then carries the load of the
// moment it was measured, and the moments of one region of the tree together). A ratio
// (actual over predicted, the pace) keeps that noise; the mean of this build's durations
// drops what the history knows. The line is the least-squares fit actual = a + b x
// predicted, shrunk towards the ratio (a = 0, b = actual / predicted) by how uncertain
// its slope is (James-Stein: the share of the slope's departure from the ratio that its
// standard error does not explain is kept). With few commands, or predictions that
// hardly differ, it stays the ratio; with many alike commands whose predictions do not
// explain their durations, it tends to their mean. The line holds only near the
// predictions it was fitted to, up to twice the longest (duration_fit.cc says why):
// beyond, a command takes the line's value there plus the ratio times the rest (this
// build has shown nothing of how longer commands follow their history, and the
// history's own scale is the better guess); below half the shortest, the line's value
// there scaled down to 0. Fitted early to alike commands, the line is nearly flat (0.06 s
// + 0.06 x in the ETA benchmark's mixed tree): carried to a 12 s compile not seen yet,
// it would say 0.8 s.
//
// Running sums only: add() is O(1). Not thread-safe (BuildProgress's lock guards it).
#pragma once

#include <cstdint>
#include <limits>

namespace spawnpool::detail {

struct DurationLine {
  double intercept = 0;  ///< seconds
  double slope = 1;
  /// Where the line holds (seconds of prediction): half the shortest prediction fitted
  /// to twice the longest.
  double low = 0;
  double high = std::numeric_limits<double>::infinity();
  /// Actual over predicted of the commands fitted: the slope beyond `high`.
  double ratio = 1;
  double operator()(double predicted_s) const {
    if (predicted_s > high) return intercept + slope * high + ratio * (predicted_s - high);
    if (predicted_s < low) return (intercept + slope * low) * predicted_s / low;
    return intercept + slope * predicted_s;
  }
};

class DurationFit {
 public:
  /// A finished command: what was predicted for it and what it took (seconds, > 0).
  void add(double predicted_s, double actual_s);
  std::uint64_t count() const { return count_; }
  /// The line (see above); as predicted (0 + 1 x) while nothing was added.
  DurationLine line() const;

 private:
  std::uint64_t count_ = 0;
  double sum_p_ = 0, sum_a_ = 0, sum_pp_ = 0, sum_pa_ = 0, sum_aa_ = 0;
  double min_p_ = std::numeric_limits<double>::infinity(), max_p_ = 0;
};

}  // namespace spawnpool::detail
