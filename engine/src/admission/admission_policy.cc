#include "engine/src/admission/admission_policy.h"

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

std::uint64_t as_bytes(std::int64_t value) { return value > 0 ? static_cast<std::uint64_t>(value) : 0; }

}  // namespace

MemoryAdmissionPolicy::MemoryAdmissionPolicy(AdmissionOptions options,
                                             std::unique_ptr<BudgetMeter> budget,
                                             std::unique_ptr<PressureSource> pressure,
                                             HistorySnapshot history, std::int64_t now_ns)
    : options_(options),
      budget_(std::move(budget)),
      pressure_(std::move(pressure), options.pressure),
      predictor_(std::move(history), options.prediction) {
  if (budget_) {
    budget_bytes_ = budget_->measure();
    budget_measured_ns_ = now_ns;
  }
}

void MemoryAdmissionPolicy::refresh_budget(std::int64_t now_ns) {
  // Measured while our commands run, MemAvailable and the cgroup's usage would count
  // their memory a second time next to their predictions.
  if (!budget_ || !budget_->automatic() || running_ != 0) return;
  if (now_ns - budget_measured_ns_ < options_.budget_refresh_ns) return;
  budget_bytes_ = budget_->measure();
  budget_measured_ns_ = now_ns;
}

void MemoryAdmissionPolicy::predict(JobInfo& job) const {
  std::uint64_t fallback = options_.default_estimate_bytes;
  if (fallback == 0)
    fallback = std::max(kMinDefaultEstimate, budget_bytes_ ? std::min(kGiB, *budget_bytes_ / 5) : kGiB);
  const Prediction prediction = predictor_.predict(job.key, fallback);
  job.predicted_peak_bytes =
      static_cast<std::int64_t>(std::max(prediction.bytes, as_bytes(job.peak_floor_bytes)));
  job.prediction_learned = learned(prediction.source);
}

bool MemoryAdmissionPolicy::fits(const JobInfo& job) const {
  if (!budget_bytes_) return true;
  return running_bytes_ <= *budget_bytes_ &&
         as_bytes(job.predicted_peak_bytes) <= *budget_bytes_ - running_bytes_;
}

void MemoryAdmissionPolicy::on_submit(JobInfo& job) { predict(job); }

Admission MemoryAdmissionPolicy::admit(JobInfo& job, std::int64_t now_ns) {
  refresh_budget(now_ns);
  held_for_pressure_ = false;
  // Learned estimates improve as similar commands finish: use the latest.
  if (job.prediction_learned) predict(job);
  // Progress: with nothing of ours running, neither the budget nor pressure (which may
  // be someone else's) can be helped by waiting.
  if (running_ == 0) return Admission::kStart;
  if (pressure_.paused(now_ns)) {
    held_for_pressure_ = true;
    return Admission::kHold;
  }
  return fits(job) ? Admission::kStart : Admission::kWait;
}

void MemoryAdmissionPolicy::on_dispatch(JobInfo& job, int /*slot*/) {
  ++running_;
  running_bytes_ += as_bytes(job.predicted_peak_bytes);
  job.predicted_in_use_bytes = static_cast<std::int64_t>(running_bytes_);
  job.budget_bytes = budget_bytes_ ? static_cast<std::int64_t>(*budget_bytes_) : 0;
}

void MemoryAdmissionPolicy::on_finish(const JobInfo& job, const Result& result) {
  if (running_ > 0) --running_;
  running_bytes_ -= std::min(running_bytes_, as_bytes(job.predicted_peak_bytes));
  if (result.peak_memory_bytes > 0) predictor_.observe(job.key, as_bytes(result.peak_memory_bytes));
}

std::optional<std::int64_t> MemoryAdmissionPolicy::next_recheck_ns() const {
  // A budget wait ends only when a job ends (an event); a pressure hold can end with
  // the next reading.
  if (held_for_pressure_) return pressure_.next_poll_ns();
  return std::nullopt;
}

}  // namespace spawnpool::detail
