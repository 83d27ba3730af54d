// Which queued job gets which free slot. Jobs wait in submission order; at each event (a
// job queued, a job finished, the policy's recheck timer) the queue is walked in order
// and every job the policy admits gets the slot freed last (its spawner's pages and
// caches are the warmest). Exclusive jobs run alone. The fast path, a free slot and
// nobody waiting, is one lock and one policy call. Thread-safe: one mutex; a submitter
// that has to wait sleeps on its own condition variable, woken only for its own start.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "scheduling_policy.h"

namespace spawnpool::detail {

class Scheduler {
 public:
  /// Slots 0 to `slots - 1` start free.
  Scheduler(std::size_t slots, std::unique_ptr<SchedulingPolicy> policy);
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
  /// Fails every queued and later acquire with closed. Slots still in use come back
  /// through release() as usual. Idempotent.
  void close();
  /// Whether the policy reads JobInfo::key (so submitters build it). Fixed at start.
  bool wants_keys() const { return wants_keys_; }

 private:
  struct Waiter {
    explicit Waiter(JobInfo& waiting) : job(&waiting) {}
    JobInfo* job;
    int slot = -1;
    bool closed = false;
    std::int64_t slot_free_since_ns = 0;  // 0: no slot has been free since the last look
    std::condition_variable wake;
  };

  Admission decide_locked(const JobInfo& job) const;
  int start_locked(JobInfo& job);
  void dispatch_queued_locked();
  void count_admission_waits_locked();
  void wait_for_start_locked(std::unique_lock<std::mutex>& lock, Waiter& waiter);

  const std::unique_ptr<SchedulingPolicy> policy_;
  const bool wants_keys_;
  std::mutex mutex_;
  std::vector<int> free_slots_;   // a stack: back() was freed last
  std::vector<Waiter*> queue_;    // submission order; each Waiter lives on its submitter's stack
  std::size_t running_ = 0;       // slots handed out and not released
  std::size_t exclusive_queued_ = 0;
  bool exclusive_running_ = false;
  bool closed_ = false;
};

}  // namespace spawnpool::detail
