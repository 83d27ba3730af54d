#include "scheduler.h"

#include <algorithm>

#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {

Scheduler::Scheduler(std::size_t slots, std::unique_ptr<SchedulingPolicy> policy)
    : policy_(std::move(policy)), wants_keys_(policy_->wants_keys()) {
  // Slot 0 on top: the first jobs of a build go to the first spawners.
  free_slots_.reserve(slots);
  for (std::size_t i = slots; i > 0; --i) free_slots_.push_back(static_cast<int>(i - 1));
}

// Exclusivity is the scheduler's rule, so that every policy keeps it; the policy then
// has the last word.
Admission Scheduler::decide_locked(const JobInfo& job) const {
  if (free_slots_.empty() || exclusive_running_) return Admission::kHold;
  if (job.exclusive) {
    if (running_ > 0) return Admission::kHold;
  } else if (exclusive_queued_ > 0) {
    return Admission::kWait;  // the exclusive job further on must be reached
  }
  return policy_->admit(job);
}

int Scheduler::start_locked(JobInfo& job) {
  const int slot = free_slots_.back();
  free_slots_.pop_back();
  ++running_;
  if (job.exclusive) exclusive_running_ = true;
  job.dispatched_ns = monotonic_ns();
  policy_->on_dispatch(job, slot);
  return slot;
}

// Loop structure: walk the queue in order. A job the policy admits starts (passing every
// job still queued before it); kWait goes on to the next job; kHold, or no free slot,
// ends the walk, so nothing passes a held job.
void Scheduler::dispatch_queued_locked() {
  for (std::size_t i = 0; i < queue_.size();) {
    Waiter& waiter = *queue_[i];
    const Admission admission = decide_locked(*waiter.job);
    if (admission == Admission::kHold) break;
    if (admission == Admission::kWait) {
      ++i;
      continue;
    }
    for (std::size_t before = 0; before < i; ++before) ++queue_[before]->job->times_passed;
    if (waiter.slot_free_since_ns != 0)
      waiter.job->admission_wait_ns += monotonic_ns() - waiter.slot_free_since_ns;
    if (waiter.job->exclusive) --exclusive_queued_;
    waiter.slot = start_locked(*waiter.job);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    // Under the lock: the waiter cannot return (and take its condition variable with
    // it) before this call is over.
    waiter.wake.notify_one();
  }
  count_admission_waits_locked();
}

// A queued job waits for admission, not for a slot, while some slot is free: that time
// is the policy's doing (JobInfo::admission_wait_ns).
void Scheduler::count_admission_waits_locked() {
  if (queue_.empty()) return;
  const bool slot_free = !free_slots_.empty();
  const std::int64_t now = monotonic_ns();
  for (Waiter* waiter : queue_) {
    if (slot_free && waiter->slot_free_since_ns == 0) {
      waiter->slot_free_since_ns = now;
    } else if (!slot_free && waiter->slot_free_since_ns != 0) {
      waiter->job->admission_wait_ns += now - waiter->slot_free_since_ns;
      waiter->slot_free_since_ns = 0;
    }
  }
}

void Scheduler::wait_for_start_locked(std::unique_lock<std::mutex>& lock, Waiter& waiter) {
  while (waiter.slot < 0 && !waiter.closed) {
    const std::chrono::milliseconds recheck = policy_->recheck_interval();
    if (recheck.count() <= 0) {
      waiter.wake.wait(lock);
    } else if (waiter.wake.wait_for(lock, recheck) == std::cv_status::timeout &&
               waiter.slot < 0 && !waiter.closed) {
      dispatch_queued_locked();  // the timer event: no job came or went, pressure may have
    }
  }
}

Scheduler::Dispatch Scheduler::acquire(JobInfo& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return {-1, true};
  policy_->on_submit(job);
  const bool nobody_waits = queue_.empty();
  if (nobody_waits && decide_locked(job) == Admission::kStart) return {start_locked(job), false};
  Waiter waiter(job);
  queue_.push_back(&waiter);
  if (job.exclusive) ++exclusive_queued_;
  // With others queued, a new job is an event for all of them; alone, it was just asked.
  if (nobody_waits)
    count_admission_waits_locked();
  else
    dispatch_queued_locked();
  wait_for_start_locked(lock, waiter);
  return {waiter.slot, waiter.closed};
}

Scheduler::Dispatch Scheduler::try_acquire(JobInfo& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return {-1, true};
  policy_->on_submit(job);
  if (queue_.empty())
    return {decide_locked(job) == Admission::kStart ? start_locked(job) : -1, false};
  Waiter waiter(job);
  queue_.push_back(&waiter);
  if (job.exclusive) ++exclusive_queued_;
  dispatch_queued_locked();
  if (waiter.slot < 0) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), &waiter));
    if (job.exclusive) --exclusive_queued_;
  }
  return {waiter.slot, false};
}

void Scheduler::release(int slot, const JobInfo& job, const Result& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  policy_->on_finish(job, result);
  --running_;
  if (job.exclusive) exclusive_running_ = false;
  free_slots_.push_back(slot);
  if (!queue_.empty()) dispatch_queued_locked();
}

void Scheduler::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  for (Waiter* waiter : queue_) {
    waiter->closed = true;
    waiter->wake.notify_one();
  }
  queue_.clear();
  exclusive_queued_ = 0;
}

}  // namespace spawnpool::detail
