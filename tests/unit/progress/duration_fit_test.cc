// The line the ETA puts predictions through (duration_fit.h): the history's durations
// kept up to a factor where they tell commands apart, the build's mean where they are
// noise, the ratio while too little is known.
#include <catch2/catch.hpp>
#include <random>

#include "engine/src/progress/duration_fit.h"

using namespace spawnpool::detail;

TEST_CASE("nothing finished: as predicted") {
  DurationFit fit;
  const DurationLine line = fit.line();
  CHECK(line.intercept == 0);
  CHECK(line.slope == 1);
  CHECK(line(3) == Approx(3));
}

TEST_CASE("a history that tells commands apart is kept, scaled by the build's pace") {
  // Small and large commands (0.1 s to 12 s), all 1.5x slower here than in the history,
  // with a little noise: the fit is the ratio, so the 12 s command stays 18 s.
  DurationFit fit;
  std::mt19937 random(7);
  std::uniform_real_distribution<double> noise(0.95, 1.05);
  for (int i = 0; i < 40; ++i) {
    const double predicted = i % 10 == 0 ? 12.0 : 0.1 + 0.01 * i;
    fit.add(predicted, 1.5 * predicted * noise(random));
  }
  const DurationLine line = fit.line();
  CHECK(line(12) == Approx(18).epsilon(0.05));
  CHECK(line(0.1) == Approx(0.15).epsilon(0.3));
}

TEST_CASE("a history that is noise gives way to the build's mean") {
  // Alike commands (0.08 s here, +-25%) whose history carries another build's load
  // (0.03 to 0.15 s, unrelated to what they take now): after many, a prediction of
  // 0.03 s or 0.15 s both mean about 0.08 s; the ratio would say 0.027 s and 0.13 s.
  DurationFit fit;
  std::mt19937 random(11);
  std::uniform_real_distribution<double> history(0.03, 0.15), actual(0.06, 0.10);
  for (int i = 0; i < 150; ++i) fit.add(history(random), actual(random));
  const DurationLine line = fit.line();
  CHECK(line(0.03) == Approx(0.08).epsilon(0.15));
  CHECK(line(0.15) == Approx(0.08).epsilon(0.15));
  CHECK(line.slope < 0.15);
}

TEST_CASE("too few to tell a slope: the ratio") {
  DurationFit fit;
  fit.add(1, 3);
  fit.add(2, 1);  // two points say nothing of a line
  CHECK(fit.line().intercept == 0);
  CHECK(fit.line().slope == Approx(4.0 / 3));
  DurationFit same;
  for (int i = 0; i < 10; ++i) same.add(0.5, 0.5 + 0.05 * (i % 3));  // one prediction for all
  CHECK(same.line().intercept == 0);
  CHECK(same.line()(0.5) == Approx(0.545));  // their mean
}

TEST_CASE("a line below zero for short commands falls back to the ratio") {
  // Durations growing faster than their predictions: the least-squares line crosses zero
  // above the shortest prediction; short commands would be predicted to take nothing.
  DurationFit fit;
  for (int i = 1; i <= 50; ++i) fit.add(i, i < 25 ? 0.01 : 4.0 * i);
  const DurationLine line = fit.line();
  CHECK(line.intercept == 0);
  CHECK(line(1) > 0);
}

TEST_CASE("the line holds near the predictions it was fitted to, the ratio beyond") {
  // Light commands alike (0.05-0.07 s predicted, 0.06 s each here +-10%): the fit is
  // nearly flat, their mean. A heavy command predicted 12 s, which this build has not
  // run yet, is not one of them: the line up to twice the longest prediction seen and
  // the ratio for the rest, about 12 s, not 0.06 s. A command predicted a little
  // longer than those seen (0.1 s: maybe the last build's load) stays on the line.
  DurationFit fit;
  std::mt19937 random(3);
  std::uniform_real_distribution<double> history(0.05, 0.07), actual(0.054, 0.066);
  for (int i = 0; i < 60; ++i) fit.add(history(random), actual(random));
  const DurationLine line = fit.line();
  CHECK(line.slope < 0.5);
  CHECK(line(0.06) == Approx(0.06).epsilon(0.1));
  CHECK(line(0.1) == Approx(line.intercept + line.slope * 0.1));
  CHECK(line(12.0) == Approx(12.0).epsilon(0.05));
  // Below half the shortest prediction seen: scaled down towards 0, never below it.
  CHECK(line(0.01) > 0);
  CHECK(line(0.01) == Approx(line(line.low) * 0.01 / line.low).epsilon(1e-9));
}

TEST_CASE("the line is continuous where it stops holding") {
  DurationFit fit;
  for (int i = 0; i < 40; ++i) fit.add(0.1 + 0.01 * i, 0.2 + 0.005 * i);
  const DurationLine line = fit.line();
  CHECK(line.high == Approx(2 * (0.1 + 0.01 * 39)));
  CHECK(line.low == Approx(0.05));
  CHECK(line(line.high + 1e-9) == Approx(line(line.high)).margin(1e-6));
  CHECK(line(line.low - 1e-9) == Approx(line(line.low)).margin(1e-6));
  CHECK(line(line.high + 1) == Approx(line(line.high) + line.ratio).epsilon(1e-9));
}
