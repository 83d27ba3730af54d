// eta_replay: replays recorded builds (BuildProgress.record(), progress_recording.h;
// bench_projects/eta_bench.py writes them, WORK/NAME.progress.rec) through the
// engine's own BuildProgress and estimator and prints the ETA's error against the time
// that really remained, at 25%, 50% and 75% of each build's wall time (from its begin to
// its end event), as eta_bench.py measures it, with the median over the recordings given.
// Beside it the naive elapsed x (M - N) / N with the true M. For tuning the estimator:
// rebuild this (the spawnpool_eta_replay target) and replay in milliseconds.
//
// usage: spawnpool_eta_replay [--trace] [--exact-count] RECORDING...
//        spawnpool_eta_replay --at TIMES RECORDING
//   --trace     also print each build's view at every 5% of its wall time
//   --exact-count  the driver's count of the commands to come replaced by the truth
//               (what the count's errors cost the ETA)
//   --at TIMES  print "t remaining_s" (or "t none") at each monotonic ns time of the file
//               TIMES (one a line, ascending): the replay's ETA where the live build's
//               line was sampled, to check that the replay computes what the build did
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "engine/src/progress/progress_recording.h"
#include "engine/src/progress/progress_replay.h"

using namespace spawnpool::detail;

namespace {

constexpr double kFractions[] = {0.25, 0.50, 0.75};
constexpr int kCount = 3;

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

std::string percent(const std::optional<double>& x, bool with_sign = false) {
  if (!x) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, with_sign ? "%+.0f%%" : "%.0f%%", 100 * *x);
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  bool trace = false, exact_count = false;
  std::string at;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--trace") == 0)
      trace = true;
    else if (std::strcmp(argv[i], "--exact-count") == 0)
      exact_count = true;
    else if (std::strcmp(argv[i], "--at") == 0 && i + 1 < argc)
      at = argv[++i];
    else
      paths.emplace_back(argv[i]);
  }
  if (!at.empty() && paths.size() == 1) {
    std::ifstream in(paths[0]), times(at);
    std::string error;
    const std::optional<Recording> rec = read_recording(in, &error);
    if (!rec || !times) {
      std::fprintf(stderr, "eta_replay: %s\n", rec ? ("cannot read " + at).c_str() : error.c_str());
      return 1;
    }
    ProgressReplay replay(*rec);
    long long t = 0;
    while (times >> t) {
      const StatusView view = replay.view_at(t);
      if (view.remaining_s)
        std::printf("%lld %.6f\n", t, *view.remaining_s);
      else
        std::printf("%lld none\n", t);
    }
    return 0;
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: %s [--trace] [--exact-count] RECORDING...\n", argv[0]);
    return 2;
  }
  std::vector<double> ours[kCount], naive[kCount];
  for (const std::string& path : paths) {
    std::ifstream in(path);
    std::string error;
    const std::optional<Recording> rec = read_recording(in, &error);
    if (!rec) {
      std::fprintf(stderr, "eta_replay: %s: %s\n", path.c_str(), error.c_str());
      return 1;
    }
    const double wall_s = static_cast<double>(rec->end_ns - rec->start_ns) / 1e9;
    ProgressReplay replay(*rec, exact_count);
    const double m = static_cast<double>(replay.commands_run());
    std::printf("%s: %.0f commands, %.2f s\n", path.c_str(), m, wall_s);
    std::vector<double> points;
    if (trace)
      for (int k = 1; k < 20; ++k) points.push_back(k * 0.05);
    for (double f : kFractions) points.push_back(f);
    std::sort(points.begin(), points.end());
    points.erase(std::unique(points.begin(), points.end(),
                             [](double a, double b) { return std::fabs(a - b) < 1e-9; }),
                 points.end());
    for (double f : points) {
      const std::int64_t t = rec->start_ns + static_cast<std::int64_t>(f * static_cast<double>(rec->end_ns - rec->start_ns));
      const StatusView view = replay.view_at(t);
      const double truth = static_cast<double>(rec->end_ns - t) / 1e9;
      std::optional<double> err, signed_err;  // signed: below the truth is negative
      if (view.remaining_s) {
        signed_err = (*view.remaining_s - truth) / truth;
        err = std::fabs(*signed_err);
      }
      std::optional<double> naive_err;
      if (view.done > 0)
        naive_err = std::fabs(view.elapsed_s * (m - static_cast<double>(view.done)) /
                                  static_cast<double>(view.done) - truth) / truth;
      const int slot = f == 0.25 ? 0 : std::fabs(f - 0.5) < 1e-9 ? 1 : std::fabs(f - 0.75) < 1e-9 ? 2 : -1;
      if (slot >= 0 || trace)
        std::printf("  %3.0f%%  [%llu/%llu] running %llu  left %s s, truth %.2f s: ours %s, naive %s\n", 100 * f,
                    static_cast<unsigned long long>(view.done), static_cast<unsigned long long>(view.total),
                    static_cast<unsigned long long>(view.running),
                    view.remaining_s ? std::to_string(*view.remaining_s).substr(0, 6).c_str() : "none",
                    truth, percent(signed_err, true).c_str(), percent(naive_err).c_str());
      if (slot < 0) continue;
      // No estimate is counted as missing, as eta_bench.py counts it (n/a, left out).
      if (err) ours[slot].push_back(*err);
      if (naive_err) naive[slot].push_back(*naive_err);
    }
  }
  std::printf("median over %zu:", paths.size());
  for (int i = 0; i < kCount; ++i)
    std::printf("  %.0f%%: ours %s naive %s", 100 * kFractions[i], percent(median(ours[i])).c_str(),
                percent(median(naive[i])).c_str());
  std::printf("\n");
  return 0;
}
