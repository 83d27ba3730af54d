// The one admission point: the Scheduler grants a slot, a local slot, memory (the
// policy) and a make jobserver token together, at dispatch, and a job never holds one
// while it waits for another. Against a pipe jobserver made here (the test plays make
// and its other jobs: it counts the tokens in the pipe, takes one, puts one back), with
// the fake memory-budget policy. What each job waited for (the *_wait_ns), interrupt(),
// close() with a job waiting for a token. No processes; blocked submitters are threads,
// read only after the event that starts or ends them has returned.
#include <signal.h>

#include <catch2/catch.hpp>
#include <memory>

#include "engine/src/scheduler/scheduler.h"
#include "tests/unit/scheduler/scheduler_test_support.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/make_jobserver.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::detail {
namespace {

using namespace test_scheduler;
using test::MakeJobserver;

Scheduler::Grants with_jobserver(const MakeJobserver& make, std::size_t local_slots = 0) {
  Scheduler::Grants grants;
  grants.jobserver = Jobserver::from_makeflags(make.makeflags());
  grants.local_slots = local_slots;
  REQUIRE(grants.jobserver->usable());
  return grants;
}

TEST_CASE("a job waiting for memory holds no token and no slot", "[scheduler][grants]") {
  MakeJobserver make(2);  // make -j2: the implicit slot and one token
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  {
    Scheduler scheduler(3, std::move(owned), 0, with_jobserver(make));
    JobInfo running = job_of(60);
    REQUIRE(scheduler.acquire(running).slot == 0);  // the implicit slot
    CHECK(make.tokens() == 1);

    Submitter big(scheduler, job_of(80));  // 60 + 80 > 100: waits for memory
    REQUIRE(submitted(policy, 2));
    CHECK_FALSE(big.started());
    CHECK(make.tokens() == 1);  // make's other job may have it: the bug of issue 19

    // The token is make's to give: another of its jobs takes it and gives it back.
    const char token = make.take();
    CHECK(token == 'a');
    make.put(token);

    // And the slots are free: a small job passes the big one, with the token.
    Submitter small(scheduler, job_of(30));
    REQUIRE(small.returned());
    CHECK(small.slot() == 1);
    CHECK(make.tokens() == 0);
    scheduler.release(small.slot(), small.job(), exit_result(0));
    CHECK(make.tokens() == 1);  // its token went straight back
    CHECK_FALSE(big.started());

    scheduler.release(0, running, exit_result(0));  // memory and the implicit slot free
    REQUIRE(big.returned());
    CHECK(make.tokens() == 1);
    CHECK(big.job().admission_wait_ns > 0);
    CHECK(big.job().jobserver_wait_ns == 0);
    CHECK(big.job().slot_wait_ns == 0);
    scheduler.release(big.slot(), big.job(), exit_result(0));
  }
  CHECK(make.tokens() == 1);
}

TEST_CASE("a job waiting for a token starts when make puts one back", "[scheduler][grants]") {
  test::LeakCheck leaks;
  {
    MakeJobserver make(2);
    auto owned = std::make_unique<BudgetPolicy>();
    BudgetPolicy& policy = *owned;
    policy.budget = 1000;  // memory never decides here
    Scheduler scheduler(4, std::move(owned), 0, with_jobserver(make));
    JobInfo first;
    REQUIRE(scheduler.acquire(first).slot == 0);
    const char token = make.take();  // make's other job runs
    REQUIRE(token != '\0');

    Submitter second(scheduler, JobInfo{});
    Submitter third(scheduler, JobInfo{});
    REQUIRE(submitted(policy, 3));
    CHECK_FALSE(second.started());
    CHECK_FALSE(third.started());
    CHECK(scheduler.waiting_for_token() == 2);  // what the status line shows

    make.put(token);  // make's other job ended: the scheduler's thread sees the token
    REQUIRE(test::wait_until([&] { return second.started() || third.started(); }));
    CHECK(make.tokens() == 0);
    CHECK_FALSE((second.started() && third.started()));
    Submitter& waiting = second.started() ? third : second;
    Submitter& running = second.started() ? second : third;
    CHECK(running.job().jobserver_wait_ns > 0);
    CHECK(running.job().slot_wait_ns == 0);
    CHECK(scheduler.waiting_for_token() == 1);

    // The first job ends: the implicit slot goes to the job still waiting.
    scheduler.release(0, first, exit_result(0));
    REQUIRE(waiting.returned());
    CHECK(make.tokens() == 0);
    CHECK(scheduler.waiting_for_token() == 0);
    scheduler.release(running.slot(), running.job(), exit_result(0));
    CHECK(make.tokens() == 1);
    scheduler.release(waiting.slot(), waiting.job(), exit_result(0));
    CHECK(make.tokens() == 1);
  }
  leaks.verify();  // the scheduler's eventfd and the client's fds are gone
}

TEST_CASE("local slots: local jobs wait, the others pass them", "[scheduler][grants]") {
  Scheduler::Grants grants;
  grants.local_slots = 1;
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  policy.budget = 1000;  // memory never decides here
  Scheduler scheduler(3, std::move(owned), 0, grants);
  JobInfo local_a;
  local_a.local = true;
  REQUIRE(scheduler.acquire(local_a).slot == 0);
  JobInfo local_b;
  local_b.local = true;
  Submitter b(scheduler, local_b);
  REQUIRE(submitted(policy, 2));
  JobInfo launched;  // a compile through the launcher: not local
  CHECK(scheduler.try_acquire(launched).slot >= 0);
  CHECK_FALSE(b.started());
  scheduler.release(0, local_a, exit_result(0));
  REQUIRE(b.returned());
  CHECK(b.job().local_slot_wait_ns > 0);
  CHECK(b.job().slot_wait_ns == 0);
  scheduler.release(b.slot(), b.job(), exit_result(0));
}

TEST_CASE("slot waits are counted as such", "[scheduler][grants]") {
  auto owned = std::make_unique<BudgetPolicy>();
  BudgetPolicy& policy = *owned;
  policy.budget = 1000;
  Scheduler scheduler(1, std::move(owned));
  JobInfo first;
  REQUIRE(scheduler.acquire(first).slot == 0);
  Submitter second(scheduler, JobInfo{});
  REQUIRE(submitted(policy, 2));
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  scheduler.release(0, first, exit_result(0));
  REQUIRE(second.returned());
  CHECK(second.job().slot_wait_ns > 0);
  CHECK(second.job().admission_wait_ns == 0);
  scheduler.release(0, second.job(), exit_result(0));
}

TEST_CASE("interrupt(): waiting and later jobs come back with the signal, tokens too",
          "[scheduler][grants]") {
  MakeJobserver make(3);  // two tokens
  {
    auto owned = std::make_unique<BudgetPolicy>();
    BudgetPolicy& policy = *owned;
    policy.budget = 1000;
    Scheduler scheduler(4, std::move(owned), 0, with_jobserver(make));
    JobInfo a, b;
    REQUIRE(scheduler.acquire(a).slot >= 0);
    REQUIRE(scheduler.acquire(b).slot >= 0);
    const char other = make.take();  // make's other job
    Submitter waiting(scheduler, JobInfo{});
    REQUIRE(submitted(policy, 3));
    scheduler.interrupt(SIGINT);
    REQUIRE(waiting.returned());
    CHECK(waiting.slot() == -1);
    CHECK(waiting.interrupted() == SIGINT);
    CHECK_FALSE(waiting.closed());
    JobInfo later;
    const Scheduler::Dispatch d = scheduler.acquire(later);
    CHECK(d.slot == -1);
    CHECK(d.interrupted == SIGINT);
    scheduler.interrupt(SIGTERM);  // the first signal stays
    JobInfo last;
    CHECK(scheduler.try_acquire(last).interrupted == SIGINT);
    make.put(other);
    // The running jobs end (killed by the same Ctrl-C): their tokens go back.
    scheduler.release(0, a, exit_result(-SIGINT));
    scheduler.release(1, b, exit_result(-SIGINT));
    CHECK(make.tokens() == 2);
  }
  CHECK(make.tokens() == 2);
}

TEST_CASE("close() with a job waiting for a token: closed, the watcher ends",
          "[scheduler][grants]") {
  test::LeakCheck leaks;
  {
    MakeJobserver make(2);
    const char other = make.take();
    {
      auto owned = std::make_unique<BudgetPolicy>();
      BudgetPolicy& policy = *owned;
      policy.budget = 1000;
      Scheduler scheduler(2, std::move(owned), 0, with_jobserver(make));
      JobInfo a;
      REQUIRE(scheduler.acquire(a).slot == 0);
      Submitter waiting(scheduler, JobInfo{});
      REQUIRE(submitted(policy, 2));
      scheduler.close();
      REQUIRE(waiting.returned());
      CHECK(waiting.closed());
      scheduler.release(0, a, exit_result(-9));
    }
    make.put(other);
    CHECK(make.tokens() == 1);
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::detail
