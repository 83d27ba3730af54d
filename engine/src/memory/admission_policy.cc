#include "engine/src/memory/admission_policy.h"

#include <algorithm>

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;
constexpr std::uint64_t kGiB = std::uint64_t(1) << 30;
// The default never predicts less than this, so that a budget of 0 (the reserve took it
// all) still runs one command at a time instead of counting unknown ones as free.
constexpr std::uint64_t kMinDefaultEstimate = 16 * kMiB;

bool learned(PredictionSource source) {
  return source == PredictionSource::kProgram || source == PredictionSource::kBuild ||
         source == PredictionSource::kDefault;
}

}  // namespace

AdmissionPolicy::AdmissionPolicy(AdmissionOptions options, std::unique_ptr<MemoryBudget> budget,
                                 std::unique_ptr<PressureSource> pressure,
                                 HistorySnapshot history, std::int64_t now_ns)
    : options_(options),
      max_times_passed_(options.max_times_passed
                            ? options.max_times_passed
                            : static_cast<std::uint32_t>(std::max<std::size_t>(4, 2 * options.slots))),
      budget_(std::move(budget)),
      pressure_(std::move(pressure), options.pressure),
      predictor_(std::move(history), options.prediction) {
  if (budget_) {
    budget_bytes_ = budget_->measure();
    budget_measured_ns_ = now_ns;
  }
}

void AdmissionPolicy::refresh_budget(std::int64_t now_ns) {
  // Measured while our commands run, MemAvailable and the cgroup's usage would count
  // their memory a second time next to their predictions.
  if (!budget_ || !budget_->automatic() || running_ != 0) return;
  if (now_ns - budget_measured_ns_ < options_.budget_refresh_ns) return;
  budget_bytes_ = budget_->measure();
  budget_measured_ns_ = now_ns;
}

void AdmissionPolicy::predict(AdmissionTicket& ticket) const {
  std::uint64_t fallback = options_.default_estimate_bytes;
  if (fallback == 0)
    fallback = std::max(kMinDefaultEstimate, budget_bytes_ ? std::min(kGiB, *budget_bytes_ / 5) : kGiB);
  const Prediction prediction = predictor_.predict(ticket.key, fallback);
  ticket.predicted_peak_bytes = std::max(prediction.bytes, ticket.peak_floor_bytes);
  ticket.prediction_source = prediction.source;
}

bool AdmissionPolicy::fits(const AdmissionTicket& ticket) const {
  if (!budget_bytes_) return true;
  return running_bytes_ <= *budget_bytes_ &&
         ticket.predicted_peak_bytes <= *budget_bytes_ - running_bytes_;
}

void AdmissionPolicy::on_queued(AdmissionTicket& ticket, std::int64_t now_ns) {
  if (ticket.state == AdmissionTicket::State::kQueued ||
      ticket.state == AdmissionTicket::State::kRunning)
    return;
  ticket.state = AdmissionTicket::State::kQueued;
  ticket.times_passed = 0;
  ticket.hold_mark_ns = hold_clock(now_ns);
  predict(ticket);
  ++queued_;
}

std::optional<std::size_t> AdmissionPolicy::pick(const AdmissionQueue& queue, std::int64_t now_ns) {
  if (queue.size == 0 || running_ >= options_.slots) return std::nullopt;
  refresh_budget(now_ns);
  // Learned estimates improve as similar commands finish: use the latest.
  for (std::size_t i = 0; i < queue.size; ++i) {
    AdmissionTicket& ticket = queue.at(i);
    if (learned(ticket.prediction_source)) predict(ticket);
  }
  if (exclusive_running_ > 0) return hold(now_ns, false);
  if (const std::optional<std::size_t> exclusive = pick_exclusive(queue))
    return running_ == 0 ? admit(queue, *exclusive, now_ns) : hold(now_ns, false);
  // Progress: with nothing of ours running, neither the budget nor pressure (which may
  // be someone else's) can be helped by waiting.
  if (running_ == 0) return admit(queue, 0, now_ns);
  if (pressure_.paused(now_ns)) return hold(now_ns, true);
  for (std::size_t i = 0; i < queue.size; ++i) {
    const AdmissionTicket& ticket = queue.at(i);
    if (fits(ticket)) return admit(queue, i, now_ns);
    if (ticket.times_passed >= max_times_passed_) {
      ++stats_.starvation_blocks;
      return hold(now_ns, false);
    }
  }
  return hold(now_ns, false);
}

std::optional<std::size_t> AdmissionPolicy::pick_exclusive(const AdmissionQueue& queue) const {
  for (std::size_t i = 0; i < queue.size; ++i)
    if (queue.at(i).exclusive) return i;
  return std::nullopt;
}

std::optional<std::size_t> AdmissionPolicy::admit(const AdmissionQueue& queue, std::size_t index,
                                                  std::int64_t now_ns) {
  // An exclusive job going first is not "passing": the others did not lose to a job
  // that merely fit, and must not become blockers because of it.
  if (!queue.at(index).exclusive) {
    for (std::size_t i = 0; i < index; ++i) ++queue.at(i).times_passed;
    stats_.passes += index;
  }
  end_hold(now_ns);
  return index;
}

std::optional<std::size_t> AdmissionPolicy::hold(std::int64_t now_ns, bool for_pressure) {
  if (!holding_) {
    holding_ = true;
    hold_since_ns_ = now_ns;
  }
  holding_for_pressure_ = for_pressure;
  return std::nullopt;
}

std::int64_t AdmissionPolicy::hold_clock(std::int64_t now_ns) const {
  return hold_total_ns_ + (holding_ ? now_ns - hold_since_ns_ : 0);
}

void AdmissionPolicy::end_hold(std::int64_t now_ns) {
  if (!holding_) return;
  hold_total_ns_ += now_ns - hold_since_ns_;
  holding_ = holding_for_pressure_ = false;
}

void AdmissionPolicy::on_dispatch(AdmissionTicket& ticket, std::int64_t now_ns) {
  if (ticket.state != AdmissionTicket::State::kQueued) return;
  ticket.state = AdmissionTicket::State::kRunning;
  const std::int64_t waited = hold_clock(now_ns) - ticket.hold_mark_ns;
  ticket.memory_wait_ns += waited;
  if (--queued_ == 0) end_hold(now_ns);
  ++running_;
  running_bytes_ += ticket.predicted_peak_bytes;
  if (ticket.exclusive) {
    ++exclusive_running_;
    ++stats_.exclusive_runs;
  }
  ++stats_.admitted;
  ++stats_.predictions[static_cast<std::size_t>(ticket.prediction_source)];
  if (waited > 0) {
    ++stats_.delayed;
    stats_.memory_wait_ns += waited;
  }
}

void AdmissionPolicy::on_withdrawn(AdmissionTicket& ticket, std::int64_t now_ns) {
  if (ticket.state != AdmissionTicket::State::kQueued) return;
  ticket.state = AdmissionTicket::State::kFinished;
  if (--queued_ == 0) end_hold(now_ns);
}

void AdmissionPolicy::on_finish(AdmissionTicket& ticket, const FinishedCommand& finished,
                                std::int64_t /*now_ns*/) {
  if (ticket.state != AdmissionTicket::State::kRunning) return;
  ticket.state = AdmissionTicket::State::kFinished;
  --running_;
  running_bytes_ -= std::min(running_bytes_, ticket.predicted_peak_bytes);
  if (ticket.exclusive) --exclusive_running_;
  if (finished.oom_killed) ++stats_.oom_kills;
  // An OOM-killed run's peak is a floor of what it needs: still worth learning.
  if (finished.peak_bytes > 0) predictor_.observe(ticket.key, finished.peak_bytes);
}

void AdmissionPolicy::mark_oom_retry(AdmissionTicket& ticket, std::uint64_t peak_seen_bytes) {
  ticket.exclusive = true;
  ticket.peak_floor_bytes =
      std::max({ticket.peak_floor_bytes, peak_seen_bytes, ticket.predicted_peak_bytes});
}

std::optional<std::int64_t> AdmissionPolicy::next_recheck_ns() const {
  // A budget hold ends only when a job ends (an event); a pressure hold can end with
  // the next reading.
  if (holding_ && holding_for_pressure_) return pressure_.next_poll_ns();
  return std::nullopt;
}

AdmissionStats AdmissionPolicy::stats(std::int64_t now_ns) const {
  AdmissionStats stats = stats_;
  stats.pressure_pauses = pressure_.pauses();
  stats.pressure_paused_ns = pressure_.paused_ns(now_ns);
  return stats;
}

}  // namespace spawnpool::detail
