// The Scheduler with FIFO, with a fake memory-budget policy and with the real memory
// admission policy: queue order, last-freed slot first, jobs that wait although a slot is
// free, passing and its counter, the starvation bound, held jobs, the admission-wait
// accounting, exclusive OOM retries (rerun_alone), re-evaluation at each event (queue,
// finish, the policy's recheck time), try_acquire, the hooks, close. No processes:
// blocked submitters are threads. A waiting job's state is read only after the event that
// would have started it has returned (the scheduler makes every decision under its lock,
// within that call), so no check depends on timing.
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/src/scheduler/fifo_policy.h"
#include "engine/src/admission/admission_policy.h"
#include "engine/src/scheduler/scheduler.h"
#include "tests/unit/scheduler/scheduler_test_support.h"
#include "tests/unit/support/test_support.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

using namespace std::chrono_literals;

using namespace test_scheduler;

TEST_CASE("FIFO hands out the last-freed slot first, and slot 0 first of all",
          "[scheduler][fifo]") {
  Scheduler scheduler(3, std::make_unique<FifoPolicy>());
  JobInfo a, b, c, d;
  CHECK(scheduler.acquire(a).slot == 0);
  CHECK(scheduler.acquire(b).slot == 1);
  CHECK(scheduler.acquire(c).slot == 2);
  CHECK(scheduler.try_acquire(d).slot == -1);
  CHECK_FALSE(scheduler.try_acquire(d).closed);
  scheduler.release(1, b, exit_result(0));
  scheduler.release(0, a, exit_result(0));
  CHECK(scheduler.try_acquire(d).slot == 0);
  CHECK(d.dispatched_ns >= d.submitted_ns);
  CHECK_FALSE(scheduler.wants_keys());
}

TEST_CASE("FIFO starts queued jobs in submission order", "[scheduler][fifo]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  policy.budget = 1000;  // everything fits: FIFO order is all that decides
  Scheduler scheduler(1, std::move(owned));
  JobInfo first = job_of(1);
  REQUIRE(scheduler.acquire(first).slot == 0);
  std::vector<std::unique_ptr<Submitter>> queued;
  for (int i = 0; i < 4; ++i) {
    queued.push_back(std::make_unique<Submitter>(scheduler, job_of(1)));
    REQUIRE(submitted(policy, 2 + i));  // one at a time, so the order is known
  }
  JobInfo previous = first;
  for (auto& next : queued) {
    CHECK_FALSE(next->started());
    scheduler.release(0, previous, exit_result(0));
    REQUIRE(next->returned());
    CHECK(next->slot() == 0);
    CHECK(next->job().times_passed == 0);
    previous = next->job();
  }
  scheduler.release(0, previous, exit_result(0));
}

TEST_CASE("a job may wait although a slot is free, and a later job passes it",
          "[scheduler][admission]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  Scheduler scheduler(3, std::move(owned));
  JobInfo running = job_of(60);
  REQUIRE(scheduler.acquire(running).slot == 0);

  Submitter big(scheduler, job_of(80));  // 60 + 80 > 100: waits, two slots free
  REQUIRE(submitted(policy, 2));
  CHECK_FALSE(big.started());

  // A queued job is an event: the small one fits and passes the big one.
  Submitter small(scheduler, job_of(30));
  REQUIRE(small.returned());
  CHECK(small.slot() == 1);
  CHECK_FALSE(big.started());

  // A finish is an event too; the small job leaving is not enough for the big one.
  scheduler.release(small.slot(), small.job(), exit_result(0));
  CHECK_FALSE(big.started());
  scheduler.release(0, running, exit_result(0));
  REQUIRE(big.returned());
  CHECK(big.job().times_passed == 1);
  CHECK(big.job().admission_wait_ns > 0);  // it waited with slots free the whole time
  CHECK(big.job().dispatched_ns >= big.job().submitted_ns);
  scheduler.release(big.slot(), big.job(), exit_result(0));
}

TEST_CASE("a job passed often enough is passed by nobody (the starvation bound)",
          "[scheduler][admission]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  Scheduler scheduler(4, std::move(owned), /*max_times_passed=*/1);
  JobInfo running = job_of(60);
  REQUIRE(scheduler.acquire(running).slot == 0);
  Submitter big(scheduler, job_of(80));
  REQUIRE(submitted(policy, 2));
  Submitter first_small(scheduler, job_of(10));
  REQUIRE(first_small.returned());  // passes the big job once
  CHECK(big.job().times_passed == 1);

  // Now the big job holds the queue: a small job that fits waits behind it.
  Submitter second_small(scheduler, job_of(10));
  REQUIRE(submitted(policy, 4));
  CHECK_FALSE(second_small.started());
  JobInfo probe = job_of(1);
  CHECK(scheduler.try_acquire(probe).slot == -1);  // nor does try_acquire pass it

  scheduler.release(first_small.slot(), first_small.job(), exit_result(0));
  scheduler.release(0, running, exit_result(0));
  REQUIRE(big.returned());
  REQUIRE(second_small.returned());  // 80 + 10 fits, and the big job is gone from the queue
  scheduler.release(big.slot(), big.job(), exit_result(0));
  scheduler.release(second_small.slot(), second_small.job(), exit_result(0));
}

TEST_CASE("the default starvation bound is max(4, 2 x slots)", "[scheduler][admission]") {
  for (const std::size_t slots : {std::size_t{2}, std::size_t{8}}) {
    auto owned = std::make_unique<BudgetPolicy>();
    BudgetPolicy& policy = *owned;
    const std::uint32_t bound = slots == 2 ? 4 : 16;
    Scheduler scheduler(slots, std::move(owned));
    JobInfo running = job_of(60);
    REQUIRE(scheduler.acquire(running).slot >= 0);
    Submitter big(scheduler, job_of(80));
    REQUIRE(submitted(policy, 2));
    std::vector<JobInfo> small(bound + 1, job_of(0));
    std::uint32_t passed = 0;
    for (JobInfo& job : small) {
      const Scheduler::Dispatch d = scheduler.try_acquire(job);
      if (d.slot < 0) break;
      ++passed;
      scheduler.release(d.slot, job, exit_result(0));
    }
    CHECK(passed == bound);
    CHECK(big.job().times_passed == bound);
    scheduler.release(0, running, exit_result(0));
    REQUIRE(big.returned());
    scheduler.release(big.slot(), big.job(), exit_result(0));
  }
}

TEST_CASE("a policy's hold stops everything behind the job", "[scheduler][admission]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  Scheduler scheduler(3, std::move(owned));
  JobInfo running = job_of(10);
  REQUIRE(scheduler.acquire(running).slot == 0);
  policy.pressure = true;
  Submitter first(scheduler, job_of(10));
  REQUIRE(submitted(policy, 2));
  Submitter second(scheduler, job_of(10));
  REQUIRE(submitted(policy, 3));
  JobInfo probe = job_of(1);
  CHECK(scheduler.try_acquire(probe).slot == -1);
  CHECK_FALSE(first.started());
  CHECK_FALSE(second.started());
  policy.pressure = false;
  scheduler.release(0, running, exit_result(0));
  REQUIRE(first.returned());
  REQUIRE(second.returned());
  CHECK(first.job().times_passed == 0);
  scheduler.release(first.slot(), first.job(), exit_result(0));
  scheduler.release(second.slot(), second.job(), exit_result(0));
}

TEST_CASE("with a recheck time, a waiting job is admitted with no job ending",
          "[scheduler][admission][timer]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  policy.recheck_ms = 10;
  Scheduler scheduler(2, std::move(owned));
  JobInfo running = job_of(60);
  REQUIRE(scheduler.acquire(running).slot == 0);
  Submitter big(scheduler, job_of(80));
  REQUIRE(submitted(policy, 2));
  CHECK_FALSE(big.started());
  policy.budget = 200;  // memory was freed elsewhere; no event tells the scheduler
  REQUIRE(big.returned());
  CHECK(big.slot() == 1);
  scheduler.release(big.slot(), big.job(), exit_result(0));
  scheduler.release(0, running, exit_result(0));
}

TEST_CASE("admission wait counts only while a slot is free", "[scheduler][admission]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  policy.budget = 1000;
  Scheduler scheduler(1, std::move(owned));
  JobInfo running = job_of(1);
  REQUIRE(scheduler.acquire(running).slot == 0);
  Submitter waiting(scheduler, job_of(1));  // waits for the one slot, not for memory
  REQUIRE(submitted(policy, 2));
  std::this_thread::sleep_for(20ms);
  scheduler.release(0, running, exit_result(0));
  REQUIRE(waiting.returned());
  CHECK(waiting.job().admission_wait_ns == 0);
  scheduler.release(waiting.slot(), waiting.job(), exit_result(0));
}

// An OOM-killed job on a thread of its own: rerun_alone() blocks until it runs again.
class Rerun {
 public:
  Rerun(Scheduler& scheduler, JobInfo& job, int slot) {
    thread_ = std::thread([this, &scheduler, &job, slot] {
      slot_ = scheduler.rerun_alone(slot, job, exit_result(1)).slot;
    });
  }
  ~Rerun() { thread_.join(); }
  bool started() const { return slot_.load() >= 0; }
  int slot() const { return slot_.load(); }

 private:
  std::atomic<int> slot_{-2};
  std::thread thread_;
};

TEST_CASE("an OOM retry keeps its slot and runs alone", "[scheduler][exclusive]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  policy.budget = 1000;
  Scheduler scheduler(3, std::move(owned));
  JobInfo victim = job_of(1), other = job_of(1);
  REQUIRE(scheduler.acquire(victim).slot == 0);
  REQUIRE(scheduler.acquire(other).slot == 1);
  victim.peak_floor_bytes = 500;
  Rerun rerun(scheduler, victim, 0);
  REQUIRE(test::wait_until([&] { return policy.submitted.load() == 3; }));  // asked again
  CHECK_FALSE(rerun.started());  // `other` runs
  // While it waits nothing else starts, although slots are free and everything fits.
  JobInfo later = job_of(1);
  CHECK(scheduler.try_acquire(later).slot == -1);
  Submitter blocked(scheduler, job_of(1));
  REQUIRE(submitted(policy, 4));
  CHECK_FALSE(blocked.started());

  scheduler.release(1, other, exit_result(0));
  REQUIRE(test::wait_until([&] { return rerun.started(); }));
  CHECK(rerun.slot() == 0);  // its own slot, although slot 1 was freed last
  CHECK(victim.exclusive);
  CHECK(victim.predicted_peak_bytes == 500);  // asked again, with the floor
  CHECK(victim.admission_wait_ns > 0);
  CHECK_FALSE(blocked.started());  // nor while it runs
  CHECK(scheduler.try_acquire(later).slot == -1);
  scheduler.release(0, victim, exit_result(0));
  REQUIRE(blocked.returned());
  CHECK(blocked.job().times_passed == 0);
  scheduler.release(blocked.slot(), blocked.job(), exit_result(0));
}

TEST_CASE("an OOM retry waiting when the scheduler closes gets no slot", "[scheduler][exclusive]") {
  Scheduler scheduler(2, std::make_unique<FifoPolicy>());
  JobInfo victim, other;
  REQUIRE(scheduler.acquire(victim).slot == 0);
  REQUIRE(scheduler.acquire(other).slot == 1);
  {
    Rerun rerun(scheduler, victim, 0);
    std::this_thread::sleep_for(20ms);
    scheduler.close();
  }
  scheduler.release(1, other, exit_result(0));
  JobInfo late;
  CHECK(scheduler.acquire(late).closed);
}

// Counts on_submit() calls (the test waits on the atomic); the rest is `inner`'s.
class Counted final : public SchedulingPolicy {
 public:
  explicit Counted(std::unique_ptr<SchedulingPolicy> inner) : inner_(std::move(inner)) {}
  std::atomic<int> submitted{0};
  void on_submit(JobInfo& job) override {
    inner_->on_submit(job);
    ++submitted;
  }
  Admission admit(JobInfo& job, std::int64_t now_ns) override { return inner_->admit(job, now_ns); }
  void on_dispatch(JobInfo& job, int slot) override { inner_->on_dispatch(job, slot); }
  void on_finish(const JobInfo& job, const Result& r) override { inner_->on_finish(job, r); }
  std::optional<std::int64_t> next_recheck_ns() const override { return inner_->next_recheck_ns(); }
  bool wants_keys() const override { return inner_->wants_keys(); }

 private:
  std::unique_ptr<SchedulingPolicy> inner_;
};

TEST_CASE("the memory policy under the real scheduler: fits pass, the bound holds",
          "[scheduler][admission][memory]") {
  constexpr std::int64_t kMiB = 1 << 20;
  HistorySnapshot history;  // command N peaked at peaks[N - 1] MiB
  const std::int64_t peaks[] = {600, 500, 100, 100, 100};
  for (std::uint64_t n = 1; n <= 5; ++n) history.add(n, 0, {peaks[n - 1] * kMiB, 1});
  auto budget = std::make_unique<BudgetMeter>(
      MemoryBudget::of_bytes(1000 * static_cast<std::uint64_t>(kMiB)), nullptr, nullptr);
  auto counted = std::make_unique<Counted>(std::make_unique<MemoryAdmissionPolicy>(
      AdmissionOptions{}, std::move(budget), nullptr, std::move(history), monotonic_ns()));
  Counted& policy = *counted;
  Scheduler scheduler(8, std::move(counted), /*max_times_passed=*/2);
  CHECK(scheduler.wants_keys());
  auto command = [](std::uint64_t n) {
    JobInfo job;
    job.key.exact = n;
    job.key.program = 1;
    return job;
  };
  JobInfo a = command(1);
  const int a_slot = scheduler.acquire(a).slot;
  REQUIRE(a_slot >= 0);
  CHECK(a.predicted_peak_bytes == 600 * kMiB);
  Submitter big(scheduler, command(2));  // 600 + 500 > 1000: waits
  REQUIRE(test::wait_until([&] { return policy.submitted.load() == 2; }));
  JobInfo s1 = command(3), s2 = command(4), s3 = command(5);
  const Scheduler::Dispatch d1 = scheduler.try_acquire(s1);
  const Scheduler::Dispatch d2 = scheduler.try_acquire(s2);
  CHECK(d1.slot >= 0);
  CHECK(d2.slot >= 0);
  CHECK(big.job().times_passed == 2);
  CHECK(scheduler.try_acquire(s3).slot == -1);  // would fit (900), but Big was passed enough
  scheduler.release(a_slot, a, exit_result(0));
  REQUIRE(big.returned());  // 200 + 500 fits now
  CHECK(big.job().admission_wait_ns > 0);
  scheduler.release(d1.slot, s1, exit_result(0));
  scheduler.release(d2.slot, s2, exit_result(0));
  scheduler.release(big.slot(), big.job(), exit_result(0));
}

TEST_CASE("try_acquire gives nothing while earlier jobs wait, or the policy says no",
          "[scheduler][try]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  Scheduler scheduler(2, std::move(owned));
  JobInfo running = job_of(60);
  REQUIRE(scheduler.acquire(running).slot == 0);
  JobInfo too_big = job_of(50);
  const Scheduler::Dispatch refused = scheduler.try_acquire(too_big);
  CHECK(refused.slot == -1);
  CHECK_FALSE(refused.closed);
  JobInfo fits = job_of(40);
  const Scheduler::Dispatch granted = scheduler.try_acquire(fits);
  CHECK(granted.slot == 1);
  CHECK(policy.dispatched == 2);
  scheduler.release(granted.slot, fits, exit_result(0));
  scheduler.release(0, running, exit_result(0));
}

TEST_CASE("the policy hears of each submit, dispatch and finish, with keys",
          "[scheduler][hooks]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  Scheduler scheduler(2, std::move(owned));
  CHECK(scheduler.wants_keys());
  JobInfo known;
  known.key.exact = 12345;
  policy.history[known.key.exact] = 70;
  REQUIRE(scheduler.acquire(known).slot == 0);
  CHECK(known.predicted_peak_bytes == 70);
  JobInfo other = job_of(0);
  REQUIRE(scheduler.acquire(other).slot == 1);
  scheduler.release(1, other, exit_result(3));
  scheduler.release(0, known, exit_result(4));
  CHECK(policy.dispatch_slots == std::vector<int>{0, 1});
  CHECK(policy.finish_returncodes == std::vector<int>{3, 4});
  CHECK(policy.running_bytes == 0);
}

TEST_CASE("close releases waiting submitters and refuses new ones", "[scheduler][close]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  Scheduler scheduler(1, std::move(owned));
  JobInfo running = job_of(1);
  REQUIRE(scheduler.acquire(running).slot == 0);
  Submitter waiting(scheduler, job_of(1));
  REQUIRE(submitted(policy, 2));
  scheduler.close();
  REQUIRE(waiting.returned());
  CHECK(waiting.slot() == -1);
  CHECK(waiting.closed());
  JobInfo late;
  CHECK(scheduler.acquire(late).closed);
  CHECK(scheduler.try_acquire(late).closed);
  scheduler.release(0, running, exit_result(0));  // a slot in use still comes back
  CHECK(policy.finished == 1);
  scheduler.close();  // idempotent
}

}  // namespace
}  // namespace spawnpool::detail
