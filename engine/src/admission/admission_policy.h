// Memory-aware admission, as the Scheduler's policy (scheduling_policy.h): a queued job
// may start while the running jobs' predicted peaks plus its own fit the memory budget,
// or when nothing of ours runs (progress); nothing starts while memory pressure is high.
// The queue's rules (order, passing and its bound, exclusive OOM retries, the time a job
// waits while a slot is free, the recheck timer) are the Scheduler's, not this class's.
// Pure logic over injected sources (budget, pressure) and the history snapshot.
// Threading: the Scheduler calls it under its lock; the accessors below are for tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "engine/src/admission/admission_policy_predictor.h"
#include "engine/src/history/history_store_snapshot.h"
#include "engine/src/admission/budget_meter.h"
#include "engine/src/admission/memory_pressure.h"
#include "engine/src/scheduler/scheduling_policy.h"

namespace spawnpool::detail {

struct AdmissionOptions {
  /// The prediction before anything is known; 0: min(1 GiB, budget / 5) (Buck2's choice:
  /// five unknown commands fill the budget), 1 GiB without a budget.
  std::uint64_t default_estimate_bytes = 0;
  /// `auto` budgets are measured again when nothing runs (nothing of ours is in the
  /// numbers then), at most this often.
  std::int64_t budget_refresh_ns = 1'000'000'000;
  PressureThresholds pressure;
  PredictorOptions prediction;
};

class MemoryAdmissionPolicy final : public SchedulingPolicy {
 public:
  /// `budget` null: no memory budget (only pressure holds admissions back); `pressure`
  /// null: no pressure feedback. Measures the budget at `now_ns`.
  MemoryAdmissionPolicy(AdmissionOptions options, std::unique_ptr<BudgetMeter> budget,
                        std::unique_ptr<PressureSource> pressure, HistorySnapshot history,
                        std::int64_t now_ns);

  /// Predicts the job's peak: its own measurement, a similar command's, or the default;
  /// never below its peak_floor_bytes (an OOM retry's).
  void on_submit(JobInfo& job) override;
  /// kStart when nothing of ours runs; kHold while pressure is high; else kStart when
  /// the job's prediction fits next to the running ones', kWait when it does not.
  Admission admit(JobInfo& job, std::int64_t now_ns) override;
  /// The job counts as running from now, with its prediction.
  void on_dispatch(JobInfo& job, int slot) override;
  /// Its memory is free again, and its measured peak (Result::peak_memory_bytes) is
  /// learned; an OOM-killed run's too (a floor of what it needs).
  void on_finish(const JobInfo& job, const Result& result) override;
  /// While admissions are held for pressure: the next pressure reading.
  std::optional<std::int64_t> next_recheck_ns() const override;
  bool wants_keys() const override { return true; }

  std::optional<std::uint64_t> budget_bytes() const { return budget_bytes_; }
  std::uint64_t running_predicted_bytes() const { return running_bytes_; }
  std::size_t running() const { return running_; }
  const PressureGate& pressure() const { return pressure_; }

 private:
  void refresh_budget(std::int64_t now_ns);
  void predict(JobInfo& job) const;
  bool fits(const JobInfo& job) const;

  AdmissionOptions options_;
  std::unique_ptr<BudgetMeter> budget_;
  PressureGate pressure_;
  PeakPredictor predictor_;

  std::optional<std::uint64_t> budget_bytes_;  // unset: no limit
  std::int64_t budget_measured_ns_ = 0;
  std::size_t running_ = 0;
  std::uint64_t running_bytes_ = 0;  // predictions of the running jobs, summed
  bool held_for_pressure_ = false;   // the last admit() said kHold because of pressure
};

}  // namespace spawnpool::detail
