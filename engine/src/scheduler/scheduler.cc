#include "engine/src/scheduler/scheduler.h"

#include <algorithm>
#include <chrono>

#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

// After a recheck, the next comes no sooner than this, whatever the policy says: a
// policy whose recheck time stays in the past must not make the waiters spin.
constexpr std::int64_t kMinRecheckGapNs = 10'000'000;

std::uint32_t default_max_times_passed(std::size_t slots) {
  return static_cast<std::uint32_t>(std::max<std::size_t>(4, 2 * slots));
}

}  // namespace

Scheduler::Scheduler(std::size_t slots, std::unique_ptr<SchedulingPolicy> policy,
                     std::uint32_t max_times_passed)
    : policy_(std::move(policy)),
      wants_keys_(policy_->wants_keys()),
      max_times_passed_(max_times_passed ? max_times_passed : default_max_times_passed(slots)) {
  // Slot 0 on top: the first jobs of a build go to the first spawners.
  free_slots_.reserve(slots);
  for (std::size_t i = slots; i > 0; --i) free_slots_.push_back(static_cast<int>(i - 1));
}

// The queue's rules come first, so that every policy keeps them; the policy then has
// the last word, except that a job passed often enough is passed no more.
Admission Scheduler::decide_locked(JobInfo& job, bool slot_free, std::int64_t now_ns) {
  if (!slot_free || exclusive_running_) return Admission::kHold;
  // An exclusive job is first in the queue: holding it holds everything behind it.
  if (job.exclusive && running_ > 0) return Admission::kHold;
  const Admission admission = policy_->admit(job, now_ns);
  if (admission == Admission::kWait && job.times_passed >= max_times_passed_)
    return Admission::kHold;
  return admission;
}

int Scheduler::start_locked(JobInfo& job, int reserved_slot, std::int64_t now_ns) {
  int slot = reserved_slot;
  if (slot < 0) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  ++running_;
  if (job.exclusive) exclusive_running_ = true;
  job.dispatched_ns = now_ns;
  policy_->on_dispatch(job, slot);
  return slot;
}

// Loop structure: walk the queue in order. A job the policy admits starts (passing every
// job still queued before it); kWait goes on to the next job; kHold, or no free slot,
// ends the walk, so nothing passes a held job.
void Scheduler::dispatch_queued_locked() {
  const std::int64_t now = monotonic_ns();
  for (std::size_t i = 0; i < queue_.size();) {
    Waiter& waiter = *queue_[i];
    const bool slot_free = waiter.reserved_slot >= 0 || !free_slots_.empty();
    const Admission admission = decide_locked(*waiter.job, slot_free, now);
    if (admission == Admission::kHold) break;
    if (admission == Admission::kWait) {
      ++i;
      continue;
    }
    for (std::size_t before = 0; before < i; ++before) ++queue_[before]->job->times_passed;
    if (waiter.slot_free_since_ns != 0)
      waiter.job->admission_wait_ns += now - waiter.slot_free_since_ns;
    waiter.slot = start_locked(*waiter.job, waiter.reserved_slot, now);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    // Under the lock: the waiter cannot return (and take its condition variable with
    // it) before this call is over.
    waiter.wake.notify_one();
  }
  count_admission_waits_locked(now);
}

// A queued job waits for admission, not for a slot, while some slot is free: that time
// is the policy's doing (JobInfo::admission_wait_ns, Result::memory_wait_ns).
void Scheduler::count_admission_waits_locked(std::int64_t now_ns) {
  const bool any_slot_free = !free_slots_.empty();
  for (Waiter* waiter : queue_) {
    const bool slot_free = any_slot_free || waiter->reserved_slot >= 0;
    if (slot_free && waiter->slot_free_since_ns == 0) {
      waiter->slot_free_since_ns = now_ns;
    } else if (!slot_free && waiter->slot_free_since_ns != 0) {
      waiter->job->admission_wait_ns += now_ns - waiter->slot_free_since_ns;
      waiter->slot_free_since_ns = 0;
    }
  }
}

// The recheck timer: while the policy names a time, the waiter wakes then and walks the
// queue (every waiter may; the first one moves the policy's time on).
void Scheduler::wait_for_start_locked(std::unique_lock<std::mutex>& lock, Waiter& waiter) {
  std::int64_t not_before_ns = 0;
  while (waiter.slot < 0 && !waiter.closed) {
    const std::optional<std::int64_t> recheck = policy_->next_recheck_ns();
    if (!recheck) {
      waiter.wake.wait(lock);
      continue;
    }
    const std::int64_t due = std::max(*recheck, not_before_ns);
    const std::int64_t now = monotonic_ns();
    if (due > now) {
      waiter.wake.wait_for(lock, std::chrono::nanoseconds(due - now));
      continue;
    }
    dispatch_queued_locked();
    not_before_ns = now + kMinRecheckGapNs;
  }
}

Scheduler::Dispatch Scheduler::acquire(JobInfo& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return {-1, true};
  policy_->on_submit(job);
  const bool nobody_waits = queue_.empty();
  if (nobody_waits) {
    const std::int64_t now = monotonic_ns();
    if (decide_locked(job, !free_slots_.empty(), now) == Admission::kStart)
      return {start_locked(job, -1, now), false};
  }
  Waiter waiter(job, -1);
  queue_.push_back(&waiter);
  // With others queued, a new job is an event for all of them; alone, it was just asked.
  if (nobody_waits)
    count_admission_waits_locked(monotonic_ns());
  else
    dispatch_queued_locked();
  wait_for_start_locked(lock, waiter);
  return {waiter.slot, waiter.closed};
}

Scheduler::Dispatch Scheduler::try_acquire(JobInfo& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return {-1, true};
  policy_->on_submit(job);
  if (queue_.empty()) {
    const std::int64_t now = monotonic_ns();
    const bool start = decide_locked(job, !free_slots_.empty(), now) == Admission::kStart;
    return {start ? start_locked(job, -1, now) : -1, false};
  }
  Waiter waiter(job, -1);
  queue_.push_back(&waiter);
  dispatch_queued_locked();
  if (waiter.slot < 0) queue_.erase(std::find(queue_.begin(), queue_.end(), &waiter));
  return {waiter.slot, false};
}

void Scheduler::finish_locked(const JobInfo& job, const Result& result) {
  policy_->on_finish(job, result);
  --running_;
  if (job.exclusive) exclusive_running_ = false;
}

void Scheduler::release(int slot, const JobInfo& job, const Result& result) {
  std::lock_guard<std::mutex> lock(mutex_);
  finish_locked(job, result);
  free_slots_.push_back(slot);
  if (!queue_.empty()) dispatch_queued_locked();
}

Scheduler::Dispatch Scheduler::rerun_alone(int slot, JobInfo& job, const Result& result) {
  std::unique_lock<std::mutex> lock(mutex_);
  finish_locked(job, result);
  if (closed_) {
    free_slots_.push_back(slot);
    return {-1, true};
  }
  job.exclusive = true;
  job.times_passed = 0;
  policy_->on_submit(job);
  Waiter waiter(job, slot);
  // Behind the exclusive jobs already queued, before everything else.
  const auto first_other = std::find_if(queue_.begin(), queue_.end(),
                                        [](const Waiter* w) { return !w->job->exclusive; });
  queue_.insert(first_other, &waiter);
  dispatch_queued_locked();
  wait_for_start_locked(lock, waiter);
  return {waiter.slot, waiter.closed};
}

void Scheduler::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  for (Waiter* waiter : queue_) {
    if (waiter->reserved_slot >= 0) free_slots_.push_back(waiter->reserved_slot);
    waiter->closed = true;
    waiter->wake.notify_one();
  }
  queue_.clear();
}

}  // namespace spawnpool::detail
