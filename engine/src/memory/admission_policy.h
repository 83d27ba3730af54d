// Memory-aware admission: which queued job a free slot takes now, if any. Pure logic
// over injected sources (budget, pressure) and the history snapshot, with no thread, no
// lock and no clock of its own (each call takes CLOCK_MONOTONIC nanoseconds): the
// scheduler calls it under its own lock. docs/architecture.md ("Admission") explains it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "engine/src/memory/admission_policy_predictor.h"
#include "engine/src/memory/history_store_key.h"
#include "engine/src/memory/history_store_snapshot.h"
#include "engine/src/memory/memory_budget.h"
#include "engine/src/memory/memory_pressure.h"

namespace spawnpool::detail {

/// What the policy keeps per job. The scheduler embeds one in each job record, fills in
/// the first block before on_queued(), and passes the same object to every call about
/// that job (its address must not change while the job is queued or running).
struct AdmissionTicket {
  // Set by the scheduler.
  CommandKey key;                      ///< make_command_key(argv, effective cwd)
  bool exclusive = false;              ///< runs alone: nothing else starts while it waits or runs
  std::uint64_t peak_floor_bytes = 0;  ///< the prediction is at least this

  // Set by the policy: read them for the Result and the stats.
  std::uint64_t predicted_peak_bytes = 0;  ///< what admission counts it as; 0 before on_queued
  PredictionSource prediction_source = PredictionSource::kDefault;
  std::uint32_t times_passed = 0;   ///< later jobs admitted first while it waited (this spell)
  std::int64_t memory_wait_ns = 0;  ///< time it waited for memory while a slot was free (all spells)

  // The policy's bookkeeping; not for the scheduler.
  enum class State : std::uint8_t { kNew, kQueued, kRunning, kFinished };
  State state = State::kNew;
  std::int64_t hold_mark_ns = 0;  // the policy's hold clock when this spell began
};

/// The scheduler's queue as the policy reads it: `size` jobs, oldest first; at(i) is the
/// ticket of the i-th. pick() updates the tickets' times_passed and learned predictions.
struct AdmissionQueue {
  std::size_t size = 0;
  std::function<AdmissionTicket&(std::size_t index)> at;
};

/// What a finished command measured.
struct FinishedCommand {
  std::uint64_t peak_bytes = 0;  ///< 0: unknown (nothing is learned)
  std::int64_t duration_ns = 0;
  bool oom_killed = false;
};

struct AdmissionOptions {
  std::size_t slots = 1;  ///< the pool's job slots
  /// A job passed this many times blocks every later one until it fits or nothing runs;
  /// 0: max(4, 2 x slots), so the running set turns over about twice while it waits.
  std::uint32_t max_times_passed = 0;
  /// The prediction before anything is known; 0: min(1 GiB, budget / 5) (Buck2's choice:
  /// five unknown commands fill the budget), 1 GiB without a budget.
  std::uint64_t default_estimate_bytes = 0;
  /// `auto` budgets are measured again when nothing runs (nothing of ours is in the
  /// numbers then), at most this often.
  std::int64_t budget_refresh_ns = 1'000'000'000;
  PressureThresholds pressure;
  PredictorOptions prediction;
};

/// Counters over the policy's life, for --process-spawner-stats.
struct AdmissionStats {
  std::uint64_t admitted = 0;
  std::uint64_t delayed = 0;            ///< admissions that had waited for memory
  std::int64_t memory_wait_ns = 0;      ///< their waits, summed
  std::uint64_t passes = 0;             ///< times a job was passed by a later one
  std::uint64_t starvation_blocks = 0;  ///< refusals because a job had been passed enough
  std::uint64_t exclusive_runs = 0;
  std::uint64_t oom_kills = 0;
  std::uint64_t pressure_pauses = 0;
  std::int64_t pressure_paused_ns = 0;
  /// Admissions by PredictionSource (index: the enum's value).
  std::array<std::uint64_t, 5> predictions{};
};

class AdmissionPolicy {
 public:
  /// `budget` null: no memory budget (only pressure holds admissions back); `pressure`
  /// null: no pressure feedback. Measures the budget at `now_ns`.
  AdmissionPolicy(AdmissionOptions options, std::unique_ptr<MemoryBudget> budget,
                  std::unique_ptr<PressureSource> pressure, HistorySnapshot history,
                  std::int64_t now_ns);

  /// A job joins the queue (also a retry re-joining it): predicts its peak.
  void on_queued(AdmissionTicket& ticket, std::int64_t now_ns);
  /// With at least one slot free: the index in `queue` of the job to start now, or
  /// nothing (then call again when a job finishes or is queued, or at next_recheck_ns()).
  /// Call on_dispatch() for the job picked before calling pick() again. Rules, in order:
  /// an exclusive job runs alone (nothing starts while one runs; while one waits, it
  /// starts once nothing runs); with nothing running the oldest job starts (progress);
  /// while memory pressure is high nothing else starts; else the oldest job whose
  /// prediction fits the budget next to the running ones' starts, passing older ones
  /// that do not fit, but never one passed max_times_passed times.
  std::optional<std::size_t> pick(const AdmissionQueue& queue, std::int64_t now_ns);
  /// The job picked has a slot: it counts as running from now.
  void on_dispatch(AdmissionTicket& ticket, std::int64_t now_ns);
  /// A queued job left without running (cancelled, pool closed, try_submit declined).
  void on_withdrawn(AdmissionTicket& ticket, std::int64_t now_ns);
  /// A running job ended: its memory is free again, and its peak is learned.
  void on_finish(AdmissionTicket& ticket, const FinishedCommand& finished, std::int64_t now_ns);

  /// Makes a finished job an OOM retry before it is queued again: it will run alone,
  /// predicted at least at the peak it was killed at.
  static void mark_oom_retry(AdmissionTicket& ticket, std::uint64_t peak_seen_bytes);

  /// When pick() should be called again although no job ended or arrived: while jobs wait
  /// because of memory pressure, the next pressure reading. Unset: events suffice.
  std::optional<std::int64_t> next_recheck_ns() const;

  std::optional<std::uint64_t> budget_bytes() const { return budget_bytes_; }
  std::uint64_t running_predicted_bytes() const { return running_bytes_; }
  std::size_t running() const { return running_; }
  std::uint32_t max_times_passed() const { return max_times_passed_; }
  AdmissionStats stats(std::int64_t now_ns) const;

 private:
  void refresh_budget(std::int64_t now_ns);
  void predict(AdmissionTicket& ticket) const;
  bool fits(const AdmissionTicket& ticket) const;
  std::optional<std::size_t> pick_exclusive(const AdmissionQueue& queue) const;
  std::optional<std::size_t> admit(const AdmissionQueue& queue, std::size_t index, std::int64_t now_ns);
  std::optional<std::size_t> hold(std::int64_t now_ns, bool for_pressure);
  std::int64_t hold_clock(std::int64_t now_ns) const;
  void end_hold(std::int64_t now_ns);

  AdmissionOptions options_;
  std::uint32_t max_times_passed_;
  std::unique_ptr<MemoryBudget> budget_;
  PressureGate pressure_;
  PeakPredictor predictor_;

  std::optional<std::uint64_t> budget_bytes_;  // unset: no limit
  std::int64_t budget_measured_ns_ = 0;
  std::size_t running_ = 0;
  std::uint64_t running_bytes_ = 0;            // predictions of the running jobs, summed
  std::size_t exclusive_running_ = 0;
  std::size_t queued_ = 0;
  // The hold clock: total time the pool held jobs back for memory while a slot was free.
  // A hold starts when pick() declines with a slot free and ends at the next admission
  // (or when the queue empties); a job's wait is the clock's advance over its spell.
  bool holding_ = false;
  bool holding_for_pressure_ = false;
  std::int64_t hold_since_ns_ = 0;
  std::int64_t hold_total_ns_ = 0;  // of the holds that ended
  AdmissionStats stats_;
};

}  // namespace spawnpool::detail
