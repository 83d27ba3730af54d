#include "engine/src/progress/eta_estimator.h"

#include <algorithm>
#include <functional>
#include <queue>

namespace spawnpool::detail {

namespace {

// What a running command still needs. One that runs past its prediction is taken to be
// nearly done: a tenth of its prediction more (a command does not end the moment it
// outruns its history, and the line should not claim it will).
double remaining_of(const RunningWork& work, const std::optional<double>& typical, double pace) {
  std::optional<double> predicted = work.predicted_s ? work.predicted_s : typical;
  if (!predicted) return 0;
  *predicted *= pace;
  return std::max(*predicted - work.elapsed_s, *predicted * 0.1);
}

}  // namespace

std::optional<double> estimate_remaining_s(const EtaInput& input) {
  const bool unknown_work = input.pending_unknown > 0 ||
                            std::any_of(input.running.begin(), input.running.end(),
                                        [](const RunningWork& w) { return !w.predicted_s; });
  if (unknown_work && !input.typical_s) return std::nullopt;

  const std::size_t lanes = std::max<std::size_t>(input.parallelism, 1);
  // Each lane's time until it is free: a min-heap. Running commands take lanes first
  // (there may be more running than `parallelism` allows now: then those lanes are the
  // busiest, and the pending work waits for the earliest of them).
  std::vector<double> running;
  running.reserve(input.running.size());
  const double pace = input.pace > 0 ? input.pace : 1;
  for (const RunningWork& work : input.running) running.push_back(remaining_of(work, input.typical_s, pace));
  std::sort(running.begin(), running.end());
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  double longest_running = 0;
  for (std::size_t i = 0; i < running.size(); ++i) {
    longest_running = std::max(longest_running, running[i]);
    // The lanes beyond `lanes` end with their command: the earliest ones free up first.
    if (i + lanes >= running.size()) free_at.push(running[i]);
  }
  while (free_at.size() < lanes) free_at.push(0);

  std::vector<double> pending = input.pending_s;
  if (!std::is_sorted(pending.begin(), pending.end(), std::greater<>()))
    std::sort(pending.begin(), pending.end(), std::greater<>());
  const double typical = input.typical_s.value_or(0);
  pending.insert(std::upper_bound(pending.begin(), pending.end(), typical, std::greater<>()),
                 input.pending_unknown, typical);
  double end = longest_running;
  for (double duration : pending) {
    duration *= pace;
    const double start = free_at.top();
    free_at.pop();
    free_at.push(start + duration);
    end = std::max(end, start + duration);
  }
  return end + std::max(input.tail_s, 0.0);
}

}  // namespace spawnpool::detail
