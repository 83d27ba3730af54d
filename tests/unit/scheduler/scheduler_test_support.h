// What the scheduler's tests share: a memory-budget policy to steer admission, jobs and
// results, and a submitter blocked in acquire() on a thread of its own. No processes.
#pragma once

#include <atomic>
#include <algorithm>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "engine/src/scheduler/scheduler.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::detail::test_scheduler {

// Admits a job while the predicted peaks of the running jobs plus its own fit the budget
// (or nothing runs); holds everything while `pressure` is set. Knobs the test turns while
// submitters wait are atomics; the rest is only touched under the scheduler's lock.
class BudgetPolicy : public SchedulingPolicy {
 public:
  std::atomic<std::int64_t> budget{100};
  std::atomic<bool> pressure{false};
  std::atomic<int> recheck_ms{0};
  std::atomic<int> submitted{0};
  std::atomic<int> dispatched{0};
  std::atomic<int> finished{0};
  std::map<std::uint64_t, std::int64_t> history;  // key.exact -> peak, read by on_submit
  std::vector<int> dispatch_slots;                // in dispatch order
  std::vector<int> finish_returncodes;
  std::int64_t running_bytes = 0;
  std::int64_t next_recheck_ = 0;

  void on_submit(JobInfo& job) override {
    if (auto known = history.find(job.key.exact); known != history.end())
      job.predicted_peak_bytes = known->second;
    job.predicted_peak_bytes = std::max(job.predicted_peak_bytes, job.peak_floor_bytes);
    ++submitted;
  }
  Admission admit(JobInfo& job, std::int64_t now_ns) override {
    next_recheck_ = now_ns + recheck_ms.load() * 1'000'000LL;  // a reading's next poll
    if (running_bytes == 0) return Admission::kStart;
    if (pressure) return Admission::kHold;
    return running_bytes + job.predicted_peak_bytes <= budget ? Admission::kStart
                                                              : Admission::kWait;
  }
  void on_dispatch(JobInfo& job, int slot) override {
    running_bytes += job.predicted_peak_bytes;
    dispatch_slots.push_back(slot);
    ++dispatched;
  }
  void on_finish(const JobInfo& job, const Result& result) override {
    running_bytes -= job.predicted_peak_bytes;
    finish_returncodes.push_back(result.returncode);
    ++finished;
  }
  std::optional<std::int64_t> next_recheck_ns() const override {
    if (recheck_ms.load() <= 0) return std::nullopt;
    return next_recheck_;
  }
  bool wants_keys() const override { return true; }
};

inline JobInfo job_of(std::int64_t peak) {
  JobInfo job;
  job.predicted_peak_bytes = peak;
  return job;
}

inline Result exit_result(int code) {
  Result r;
  r.returncode = code;
  r.failure = FailureStage::kNone;
  return r;
}

// A submitter blocked in acquire() on a thread of its own.
class Submitter {
 public:
  Submitter(Scheduler& scheduler, JobInfo job) : job_(std::move(job)) {
    thread_ = std::thread([this, &scheduler] {
      const Scheduler::Dispatch d = scheduler.acquire(job_);
      closed_ = d.closed;
      interrupted_ = d.interrupted;
      slot_ = d.slot;  // last: once it is set, closed_ and job_ may be read
    });
  }
  ~Submitter() { thread_.join(); }
  bool started() const { return slot_.load() >= 0; }
  int slot() const { return slot_.load(); }
  /// Waits for acquire() to return (generous: the event that ends it has happened).
  bool returned() const {
    return test::wait_until([&] { return slot_.load() != kWaiting; });
  }
  bool closed() const { return closed_; }
  int interrupted() const { return interrupted_; }
  const JobInfo& job() const { return job_; }

 private:
  static constexpr int kWaiting = -2;
  JobInfo job_;
  std::atomic<int> slot_{kWaiting};
  bool closed_ = false;
  int interrupted_ = 0;
  std::thread thread_;
};

// Waits until `n` jobs have reached the policy's on_submit(): each is then queued or
// started, since both happen under the lock on_submit() runs under.
inline bool submitted(const BudgetPolicy& policy, int n) {
  return test::wait_until([&] { return policy.submitted.load() >= n; });
}

}  // namespace spawnpool::detail::test_scheduler
