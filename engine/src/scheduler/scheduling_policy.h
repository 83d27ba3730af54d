// The scheduler's policy: whether a queued job may start now on a free slot. This is
// the seam for memory-aware admission (issue 12): a policy predicts each job, may make a
// job wait although a slot is free, and hears of every dispatch and finish to account
// and learn. FifoPolicy (fifo_policy.h) is the default; MemoryAdmissionPolicy
// (engine/src/admission/admission_policy.h) the memory-aware one.
//
// Who owns which rule (docs/architecture.md, "The scheduler and its policy"): the
// Scheduler owns everything about the queue, for every policy: the order, exclusive
// jobs, counting passes, the starvation bound, the time a job waits while a slot is free,
// and the recheck timer. A policy answers one question per job (does it fit now?) and
// says when the answer may change by itself (next_recheck_ns).
// Threading: the Scheduler calls every method with its lock held, so calls never overlap
// and a policy needs no lock of its own; none may block or call back into the pool.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/src/history/history_store_key.h"
#include "spawnpool/result.h"

namespace spawnpool::detail {

/// What the scheduler and its policy know of one job.
struct JobInfo {
  /// The command's names for a history (argv and cwd hashed, history_store_key.h).
  /// Built only when the policy wants_keys() (it costs a parse of the command line).
  CommandKey key;
  /// The policy's forecast of its peak, from on_submit() (and admit(), which may improve
  /// it); 0: none. Never below peak_floor_bytes.
  std::int64_t predicted_peak_bytes = 0;
  /// Set for an OOM retry: the peak it was killed at; a prediction is at least this.
  std::int64_t peak_floor_bytes = 0;
  /// The prediction came from other commands of this build: admit() predicts it again,
  /// as more of them finish.
  bool prediction_learned = false;
  /// Runs alone: while it waits nothing else starts, and while it runs nothing else does
  /// (an OOM retry). Set by the scheduler (Scheduler::rerun_alone).
  bool exclusive = false;
  std::uint32_t times_passed = 0;     ///< jobs queued after it that started before it
  std::int64_t submitted_ns = 0;      ///< CLOCK_MONOTONIC, as Result::submitted_ns
  std::int64_t dispatched_ns = 0;     ///< when it got its slot; 0 until then
  /// Needs a local slot (Scheduler::Grants::local_slots): it does not go through the
  /// compiler launcher. Set by the submitter.
  bool local = false;
  // What it waited for, over all its runs (the Scheduler names one reason at a time:
  // the first thing it lacked at its last look, in the order slot, memory, local slot,
  // jobserver token). The admission wait is the policy's: memory, or an OOM retry's
  // running alone.
  std::int64_t slot_wait_ns = 0;
  std::int64_t admission_wait_ns = 0;
  std::int64_t local_slot_wait_ns = 0;
  std::int64_t jobserver_wait_ns = 0;
  // Written by the policy at on_dispatch(), for the result and its messages.
  std::int64_t predicted_in_use_bytes = 0;  ///< running predictions, its own included
  std::int64_t budget_bytes = 0;            ///< the memory budget then; 0: none
};

/// A policy's answer for one queued job.
enum class Admission {
  kStart,  ///< start it now on a free slot
  kWait,   ///< not now; jobs queued behind it may start first (each start passes it)
  kHold,   ///< not now, and nothing queued behind it may start either (memory pressure)
};

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;

  /// A job arrives (or comes back for an OOM retry), before it is first admitted:
  /// predict it. A try_submit that cannot start now is then dropped, maybe without an
  /// admit() call, with no further call.
  virtual void on_submit(JobInfo& job) { (void)job; }
  /// Whether `job` may start now. Asked only while it may (a slot free, no exclusive job
  /// in the way), for queued jobs in submission order, at each event: a job queued or
  /// finished, and next_recheck_ns(). May update the job's prediction.
  virtual Admission admit(JobInfo& job, std::int64_t now_ns) = 0;
  /// `job` got `slot` (its dispatched_ns is set). Each is followed by one on_finish().
  virtual void on_dispatch(JobInfo& job, int slot) {
    (void)job;
    (void)slot;
  }
  /// `job` left its slot with `result` (a failure too: a refused request, a dead spawner).
  virtual void on_finish(const JobInfo& job, const Result& result) {
    (void)job;
    (void)result;
  }
  /// While jobs wait, when (CLOCK_MONOTONIC) to ask again with no job queued or finished
  /// (memory pressure changes by itself); unset: only at those events.
  virtual std::optional<std::int64_t> next_recheck_ns() const { return std::nullopt; }
  /// Whether on_submit() and admit() read JobInfo::key.
  virtual bool wants_keys() const { return false; }
};

}  // namespace spawnpool::detail
