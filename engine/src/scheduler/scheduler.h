// Which queued job gets which free slot. Jobs wait in submission order; at each event (a
// job queued, a job finished, the policy's recheck time) the queue is walked in order
// and every job the policy admits gets the slot freed last (its spawner's pages and
// caches are the warmest). The queue's rules are this class's, for every policy: the
// order, exclusive jobs (an OOM retry runs alone), the count of passes and its bound,
// the time a job waits while a slot is free, the recheck timer (scheduling_policy.h
// says why). The fast path, a free slot and nobody waiting, is one lock and one policy
// call. Thread-safe: one mutex; a submitter that has to wait sleeps on its own condition
// variable, woken only for its own start (or the policy's recheck time).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/src/scheduler/scheduling_policy.h"

namespace spawnpool::detail {

class Scheduler {
 public:
  /// Slots 0 to `slots - 1` start free. A job passed `max_times_passed` times holds
  /// every later one until it starts (the starvation bound); 0: max(4, 2 x slots), so
  /// that the running set turns over about twice while it waits.
  Scheduler(std::size_t slots, std::unique_ptr<SchedulingPolicy> policy,
            std::uint32_t max_times_passed = 0);
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// What acquire() and try_acquire() give.
  struct Dispatch {
    int slot = -1;        ///< >= 0: the job runs there; release() it afterwards
    bool closed = false;  ///< no slot because close() was called
  };

  /// Queues `job` and waits until the policy starts it (or the scheduler closes). `job`
  /// must stay in place until this returns; the policy reads and the scheduler updates it.
  Dispatch acquire(JobInfo& job);
  /// Starts `job` only if the policy would start it now, behind the jobs already queued;
  /// otherwise gives no slot (and closed false) and forgets it.
  Dispatch try_acquire(JobInfo& job);
  /// `job` has left `slot` with `result`; the queue gets its chance at the slot.
  void release(int slot, const JobInfo& job, const Result& result);
  /// `job`, which ran on `slot` and ended with `result`, runs again alone (an OOM retry):
  /// the policy hears on_finish(job, result) then on_submit(job) again; the job keeps
  /// `slot`, goes first in the queue, and starts there once nothing else runs; nothing
  /// else starts while it waits or runs. Returns as acquire() does (the same slot, or
  /// closed: then the slot is the scheduler's again and nothing is to be released).
  Dispatch rerun_alone(int slot, JobInfo& job, const Result& result);
  /// Fails every queued and later acquire with closed. Slots still in use come back
  /// through release() as usual. Idempotent.
  void close();
  /// Whether the policy reads JobInfo::key (so submitters build it). Fixed at start.
  bool wants_keys() const { return wants_keys_; }

 private:
  struct Waiter {
    Waiter(JobInfo& waiting, int own_slot) : job(&waiting), reserved_slot(own_slot) {}
    JobInfo* job;
    const int reserved_slot;  // >= 0: an OOM retry's own slot, kept while it waits
    int slot = -1;
    bool closed = false;
    std::int64_t slot_free_since_ns = 0;  // 0: no slot has been free since the last look
    std::condition_variable wake;
  };

  Admission decide_locked(JobInfo& job, bool slot_free, std::int64_t now_ns);
  int start_locked(JobInfo& job, int reserved_slot, std::int64_t now_ns);
  void dispatch_queued_locked();
  void count_admission_waits_locked(std::int64_t now_ns);
  void wait_for_start_locked(std::unique_lock<std::mutex>& lock, Waiter& waiter);
  void finish_locked(const JobInfo& job, const Result& result);

  const std::unique_ptr<SchedulingPolicy> policy_;
  const bool wants_keys_;
  const std::uint32_t max_times_passed_;
  std::mutex mutex_;
  std::vector<int> free_slots_;   // a stack: back() was freed last
  // Submission order, exclusive jobs first; each Waiter lives on its submitter's stack.
  std::vector<Waiter*> queue_;
  std::size_t running_ = 0;       // slots handed out and not released
  bool exclusive_running_ = false;
  bool closed_ = false;
};

}  // namespace spawnpool::detail
