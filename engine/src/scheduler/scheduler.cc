#include "engine/src/scheduler/scheduler.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <system_error>

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
                     std::uint32_t max_times_passed, Grants grants)
    : policy_(std::move(policy)),
      wants_keys_(policy_->wants_keys()),
      max_times_passed_(max_times_passed ? max_times_passed : default_max_times_passed(slots)),
      local_limit_(grants.local_slots),
      jobserver_(std::move(grants.jobserver)) {
  // Slot 0 on top: the first jobs of a build go to the first spawners.
  free_slots_.reserve(slots);
  for (std::size_t i = slots; i > 0; --i) free_slots_.push_back(static_cast<int>(i - 1));
  if (jobserver_ && jobserver_->usable()) {
    watcher_event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (watcher_event_fd_ < 0)
      throw std::system_error(errno, std::generic_category(), "eventfd for the jobserver");
    watcher_ = std::thread([this] { watch_jobserver(); });
  }
}

Scheduler::~Scheduler() {
  close();
  if (watcher_.joinable()) watcher_.join();
  if (watcher_event_fd_ >= 0) ::close(watcher_event_fd_);
}

// The queue's rules come first, so that every policy keeps them; then the local slots,
// then the policy (which has the last word on memory, except that a job passed often
// enough is passed no more), and the token last: it is the one grant that is taken
// (read from make) rather than looked at, so it is taken only when the job starts.
Scheduler::Decision Scheduler::decide_locked(JobInfo& job, bool slot_free, std::int64_t now_ns) {
  if (!slot_free) return {Lack::kSlot, true};
  // An exclusive job is first in the queue: holding it holds everything behind it.
  if (exclusive_running_ || (job.exclusive && running_ > 0)) return {Lack::kMemory, true};
  // Jobs that are not local (launched compiles) may pass one that waits for a local slot.
  if (job.local && local_limit_ && local_running_ >= local_limit_)
    return {Lack::kLocalSlot, false};
  const Admission admission = policy_->admit(job, now_ns);
  if (admission == Admission::kWait)
    return {Lack::kMemory, job.times_passed >= max_times_passed_};
  if (admission == Admission::kHold) return {Lack::kMemory, true};
  // Every job needs a token: none for this one is none for those behind it.
  if (jobserver_ && !jobserver_->try_acquire()) return {Lack::kJobserver, true};
  return {};
}

int Scheduler::start_locked(JobInfo& job, int reserved_slot, std::int64_t now_ns) {
  int slot = reserved_slot;
  if (slot < 0) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  ++running_;
  if (job.exclusive) exclusive_running_ = true;
  if (job.local && local_limit_) ++local_running_;
  job.dispatched_ns = now_ns;
  policy_->on_dispatch(job, slot);
  return slot;
}

// Loop structure: walk the queue in order. A job that has everything starts (passing
// every job still queued before it); one that may be passed goes on to the next job; a
// hold (no free slot, memory pressure, no token) ends the walk, so nothing passes a held
// job, and every job behind it waits for the same thing.
void Scheduler::dispatch_queued_locked() {
  if (interrupted_) return;
  const std::int64_t now = monotonic_ns();
  std::size_t i = 0;
  Lack stopped_by = Lack::kNothing;
  while (i < queue_.size()) {
    Waiter& waiter = *queue_[i];
    const bool slot_free = waiter.reserved_slot >= 0 || !free_slots_.empty();
    const Decision decision = decide_locked(*waiter.job, slot_free, now);
    note_wait(waiter, decision.lack, now);
    if (decision.hold) {
      stopped_by = decision.lack;
      ++i;
      break;
    }
    if (decision.lack != Lack::kNothing) {
      ++i;
      continue;
    }
    for (std::size_t before = 0; before < i; ++before) ++queue_[before]->job->times_passed;
    waiter.slot = start_locked(*waiter.job, waiter.reserved_slot, now);
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(i));
    // Under the lock: the waiter cannot return (and take its condition variable with
    // it) before this call is over.
    waiter.wake.notify_one();
  }
  for (; i < queue_.size(); ++i) note_wait(*queue_[i], stopped_by, now);
  if (stopped_by == Lack::kJobserver && watcher_.joinable() && !token_wanted_) {
    token_wanted_ = true;
    watcher_wake_.notify_one();
  }
}

// The time since the last look goes to what the job lacked then (JobInfo's *_wait_ns;
// the admission wait is Result::memory_wait_ns).
void Scheduler::note_wait(Waiter& waiter, Lack lack, std::int64_t now_ns) {
  JobInfo& job = *waiter.job;
  const std::int64_t waited = now_ns - waiter.waiting_since_ns;
  switch (waiter.waiting_for) {
    case Lack::kNothing: break;
    case Lack::kSlot: job.slot_wait_ns += waited; break;
    case Lack::kMemory: job.admission_wait_ns += waited; break;
    case Lack::kLocalSlot: job.local_slot_wait_ns += waited; break;
    case Lack::kJobserver: job.jobserver_wait_ns += waited; break;
  }
  waiter.waiting_for = lack;
  waiter.waiting_since_ns = now_ns;
}

// Loop structure: sleep until a waiter lacks a token, then poll make's pipe (and the
// eventfd close() writes) and walk the queue when a token may be there. A token that
// another process reads first just means polling again.
void Scheduler::watch_jobserver() {
  std::unique_lock<std::mutex> lock(mutex_);
  bool pipe_broken = false;  // POLLERR/POLLNVAL: stop polling it (the releases go on)
  while (!closed_) {
    if (!token_wanted_ || interrupted_) {
      watcher_wake_.wait(lock);
      continue;
    }
    lock.unlock();
    pollfd fds[2] = {{pipe_broken ? -1 : jobserver_->poll_fd(), POLLIN, 0},
                     {watcher_event_fd_, POLLIN, 0}};
    const int ready = poll(fds, 2, -1);
    lock.lock();
    if (ready < 0) continue;  // EINTR
    if (fds[0].revents & (POLLERR | POLLNVAL | POLLHUP)) pipe_broken = true;
    if (fds[1].revents) {
      std::uint64_t count = 0;
      (void)!read(watcher_event_fd_, &count, sizeof count);
    }
    if (!(fds[0].revents & POLLIN)) continue;
    token_wanted_ = false;
    dispatch_queued_locked();
  }
}

void Scheduler::wake_watcher() {
  if (watcher_event_fd_ < 0) return;
  const std::uint64_t one = 1;
  (void)!write(watcher_event_fd_, &one, sizeof one);
}

// The recheck timer: while the policy names a time, the waiter wakes then and walks the
// queue (every waiter may; the first one moves the policy's time on).
void Scheduler::wait_for_start_locked(std::unique_lock<std::mutex>& lock, Waiter& waiter) {
  std::int64_t not_before_ns = 0;
  while (waiter.slot < 0 && !waiter.closed && !waiter.interrupted) {
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
  if (closed_) return {-1, true, 0};
  if (interrupted_) return {-1, false, interrupted_};
  policy_->on_submit(job);
  const bool nobody_waits = queue_.empty();
  Waiter waiter(job, -1);
  if (nobody_waits) {
    const std::int64_t now = monotonic_ns();
    const Decision decision = decide_locked(job, !free_slots_.empty(), now);
    if (decision.lack == Lack::kNothing) return {start_locked(job, -1, now), false, 0};
    note_wait(waiter, decision.lack, now);
    if (decision.lack == Lack::kJobserver && watcher_.joinable() && !token_wanted_) {
      token_wanted_ = true;
      watcher_wake_.notify_one();
    }
  }
  queue_.push_back(&waiter);
  // With others queued, a new job is an event for all of them; alone, it was just asked.
  if (!nobody_waits) dispatch_queued_locked();
  wait_for_start_locked(lock, waiter);
  return {waiter.slot, waiter.closed, waiter.interrupted};
}

Scheduler::Dispatch Scheduler::try_acquire(JobInfo& job) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (closed_) return {-1, true, 0};
  if (interrupted_) return {-1, false, interrupted_};
  policy_->on_submit(job);
  if (queue_.empty()) {
    const std::int64_t now = monotonic_ns();
    const bool start = decide_locked(job, !free_slots_.empty(), now).lack == Lack::kNothing;
    return {start ? start_locked(job, -1, now) : -1, false, 0};
  }
  Waiter waiter(job, -1);
  queue_.push_back(&waiter);
  dispatch_queued_locked();
  if (waiter.slot < 0) queue_.erase(std::find(queue_.begin(), queue_.end(), &waiter));
  return {waiter.slot, false, 0};
}

std::size_t Scheduler::waiting_for_token() {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<std::size_t>(std::count_if(queue_.begin(), queue_.end(), [](const Waiter* w) {
    return w->waiting_for == Lack::kJobserver;
  }));
}

// Everything the job was granted goes back with its slot: its local slot, its token.
void Scheduler::finish_locked(const JobInfo& job, const Result& result) {
  policy_->on_finish(job, result);
  --running_;
  if (job.exclusive) exclusive_running_ = false;
  if (job.local && local_limit_) --local_running_;
  if (jobserver_) jobserver_->release();
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
  if (closed_ || interrupted_) {
    free_slots_.push_back(slot);
    return {-1, closed_, closed_ ? 0 : interrupted_};
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
  return {waiter.slot, waiter.closed, waiter.interrupted};
}

void Scheduler::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
  for (Waiter* waiter : queue_) waiter->closed = true;
  end_waits_locked();
  watcher_wake_.notify_one();
  wake_watcher();
}

void Scheduler::interrupt(int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (interrupted_ || sig <= 0) return;
  interrupted_ = sig;
  for (Waiter* waiter : queue_) waiter->interrupted = sig;
  end_waits_locked();
  wake_watcher();
}

// The queued jobs leave with what they have (nothing but an OOM retry's own slot).
void Scheduler::end_waits_locked() {
  const std::int64_t now = monotonic_ns();
  for (Waiter* waiter : queue_) {
    note_wait(*waiter, Lack::kNothing, now);
    if (waiter->reserved_slot >= 0) free_slots_.push_back(waiter->reserved_slot);
    waiter->wake.notify_one();
  }
  queue_.clear();
}

}  // namespace spawnpool::detail
