// The scheduler's policy: whether a queued job may start now on a free slot. This is
// the seam for memory-aware admission (issue 12): a policy sees each job's key,
// prediction and timestamps, may make a job wait although a slot is free, and hears of
// every dispatch and finish to account and learn. FifoPolicy (fifo_policy.h) is today's.
// Threading: the Scheduler calls every method with its lock held, so calls never overlap
// and a policy needs no lock of its own; none may block or call back into the pool.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "spawnpool/result.h"

namespace spawnpool::detail {

/// What the scheduler and its policy know of one job.
struct JobInfo {
  /// The command's identity for a history: argv then cwd, each ended by a NUL. Built
  /// only when the policy wants_keys() (it costs a copy of the command line).
  std::string key;
  std::int64_t predicted_peak_bytes = 0;  ///< the policy's, from on_submit(); 0: none
  /// Runs alone: while it waits nothing else starts, and while it runs nothing else does
  /// (an OOM retry). Set before submit or by on_submit().
  bool exclusive = false;
  std::uint32_t times_passed = 0;     ///< jobs queued after it that started before it
  std::int64_t submitted_ns = 0;      ///< CLOCK_MONOTONIC, as Result::submitted_ns
  std::int64_t dispatched_ns = 0;     ///< when it got its slot; 0 until then
  std::int64_t admission_wait_ns = 0; ///< time it waited while some slot was free
};

/// A policy's answer for one queued job.
enum class Admission {
  kStart,  ///< start it now on a free slot
  kWait,   ///< not now; jobs queued behind it may start first (each start passes it)
  kHold,   ///< not now, and nothing queued behind it may pass it (a starvation bound)
};

class SchedulingPolicy {
 public:
  virtual ~SchedulingPolicy() = default;

  /// A job arrives, before it is first admitted: predict it, or make it exclusive. A
  /// try_submit that cannot start now is then dropped (maybe without an admit() call:
  /// a held job before it ends the walk), with no further call.
  virtual void on_submit(JobInfo& job) { (void)job; }
  /// Whether `job` may start now. Asked only while a slot is free, for queued jobs in
  /// submission order, and again at each event: a job queued or finished, and every
  /// recheck_interval() while a job waits.
  virtual Admission admit(const JobInfo& job) = 0;
  /// `job` got `slot` (its dispatched_ns is set). Each is followed by one on_finish().
  virtual void on_dispatch(const JobInfo& job, int slot) {
    (void)job;
    (void)slot;
  }
  /// `job` left its slot with `result` (a failure too: a refused request, a dead spawner).
  virtual void on_finish(const JobInfo& job, const Result& result) {
    (void)job;
    (void)result;
  }
  /// While jobs wait, how often to ask again with no job queued or finished (memory
  /// pressure changes by itself); zero: only at those events.
  virtual std::chrono::milliseconds recheck_interval() const { return {}; }
  /// Whether on_submit() and admit() read JobInfo::key.
  virtual bool wants_keys() const { return false; }
};

}  // namespace spawnpool::detail
