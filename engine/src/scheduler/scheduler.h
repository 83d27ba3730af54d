// Which queued job gets which free slot, and everything else a job needs to start: the
// one admission point. A job starts once it has, all at the same moment, a slot, a local
// slot (Grants::local_slots, for a job marked local), the policy's admission (memory)
// and a jobserver token (Grants::jobserver; the first running job uses the implicit
// one); it never holds one while it waits for another (a job waiting for memory holds no
// token, so make's other jobs may run). Jobs wait in submission order; at each event (a
// job queued, a job finished, the policy's recheck time, a token from make) the queue is
// walked in order and every job that can start gets the slot freed last (its spawner's
// pages and caches are the warmest). The queue's rules are this class's, for every
// policy: the order, exclusive jobs (an OOM retry runs alone), the count of passes and
// its bound, what each job waited for (JobInfo's *_wait_ns), the recheck timer
// (scheduling_policy.h says why). The fast path, everything free and nobody waiting, is
// one lock, three policy calls (on_submit, admit, on_dispatch) and (with a jobserver) one
// try for a token. Thread-safe: one
// mutex; a submitter that has to wait sleeps on its own condition variable, woken only
// for its own start (or the policy's recheck time); with a usable jobserver one thread
// of the scheduler's polls make's pipe while a job waits for a token (never a read(2)
// that blocks).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/src/scheduler/scheduling_policy.h"
#include "spawnpool/jobserver.h"

namespace spawnpool::detail {

/// What a job needs besides a slot and the policy's admission.
struct SchedulerGrants {
  /// At most this many jobs marked JobInfo::local run at once; 0: no limit.
  std::size_t local_slots = 0;
  /// make's job slots: each running job holds one (jobserver.h); null: none.
  std::shared_ptr<Jobserver> jobserver;
};

class Scheduler {
 public:
  using Grants = SchedulerGrants;

  /// Slots 0 to `slots - 1` start free. A job passed `max_times_passed` times holds
  /// every later one until it starts (the starvation bound); 0: max(4, 2 x slots), so
  /// that the running set turns over about twice while it waits.
  Scheduler(std::size_t slots, std::unique_ptr<SchedulingPolicy> policy,
            std::uint32_t max_times_passed = 0, Grants grants = {});
  ~Scheduler();  ///< close(), and the jobserver's thread ends
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  /// What acquire() and try_acquire() give.
  struct Dispatch {
    int slot = -1;        ///< >= 0: the job runs there; release() it afterwards
    bool closed = false;  ///< no slot because close() was called
    int interrupted = 0;  ///< no slot because interrupt(sig) was called: sig
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
  /// through release() as usual (and their tokens with them). Idempotent.
  void close();
  /// The build was interrupted by `sig`: every queued and later acquire gets no slot and
  /// `interrupted` = sig (the first signal stays). Running jobs are left alone.
  void interrupt(int sig);
  /// How many queued jobs wait for a jobserver token now (the status line's "waiting for
  /// a job token"): those whose last look found all but a token, and those queued behind
  /// such a one (every job needs a token, so they wait for the same thing).
  std::size_t waiting_for_token();
  /// Whether the policy reads JobInfo::key (so submitters build it). Fixed at start.
  bool wants_keys() const { return wants_keys_; }

 private:
  /// What a job lacked at its last look (the reason it waits).
  enum class Lack { kNothing, kSlot, kMemory, kLocalSlot, kJobserver };
  struct Decision {
    Lack lack = Lack::kNothing;  ///< kNothing: it starts (its token is taken)
    bool hold = false;           ///< nothing queued behind it may start either
  };

  struct Waiter {
    Waiter(JobInfo& waiting, int own_slot) : job(&waiting), reserved_slot(own_slot) {}
    JobInfo* job;
    const int reserved_slot;  // >= 0: an OOM retry's own slot, kept while it waits
    int slot = -1;
    bool closed = false;
    int interrupted = 0;
    Lack waiting_for = Lack::kNothing;  // since waiting_since_ns
    std::int64_t waiting_since_ns = 0;
    std::condition_variable wake;
  };

  Decision decide_locked(JobInfo& job, bool slot_free, std::int64_t now_ns);
  int start_locked(JobInfo& job, int reserved_slot, std::int64_t now_ns);
  void dispatch_queued_locked();
  static void note_wait(Waiter& waiter, Lack lack, std::int64_t now_ns);
  void wait_for_start_locked(std::unique_lock<std::mutex>& lock, Waiter& waiter);
  void finish_locked(const JobInfo& job, const Result& result);
  void end_waits_locked();
  void watch_jobserver();
  void wake_watcher();

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
  int interrupted_ = 0;           // the signal interrupt() was given; 0: none
  const std::size_t local_limit_;   // 0: no local slots
  std::size_t local_running_ = 0;   // local jobs running
  const std::shared_ptr<Jobserver> jobserver_;  // null: none
  // With a usable jobserver: a job waits for a token, so the watcher polls make's pipe.
  bool token_wanted_ = false;
  std::condition_variable watcher_wake_;
  int watcher_event_fd_ = -1;     // an eventfd: wakes the watcher out of poll()
  std::thread watcher_;           // joinable: runs watch_jobserver()
};

}  // namespace spawnpool::detail
