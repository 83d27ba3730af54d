// The CPU hint's sets and give-backs (worker_pool/protocol/cpu_affinity.h): a set carries
// any CPU number (past 63, past CPU_SETSIZE); a pin reads the pinned thread's own set
// from the kernel and keeps to it; a give-back the kernel refuses (a cpuset that no
// longer has the set's CPUs: simulated by a set of a CPU this machine lacks) widens the
// thread to every CPU of its cpuset instead of leaving it on the pinned one; one it
// forbids outright (a seccomp filter, in a forked copy) says so.
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "tests/unit/support/cpu_test_support.h"
#include "tests/unit/support/test_skip.h"
#include "worker_pool/protocol/cpu_affinity.h"

namespace spawnpool::test {
namespace {

using detail::CpuGiveBack;
using detail::CpuSet;

// The first CPU of `set` other than `not_this` (-1: none).
int cpu_of(const CpuSet& set, int not_this = -1) {
  for (int cpu = 0; cpu < static_cast<int>(8 * set.size_bytes()); ++cpu)
    if (set.has(cpu) && cpu != not_this) return cpu;
  return -1;
}

TEST_CASE("a CPU set carries any CPU number, past 63 and past CPU_SETSIZE", "[protocol][cpu]") {
  const int cpu = GENERATE(0, 63, 64, 100, 127, CPU_SETSIZE - 1, CPU_SETSIZE, 5000);
  const CpuSet set = CpuSet::of_cpu(cpu);
  REQUIRE_FALSE(set.empty());
  CHECK(set.has(cpu));
  CHECK_FALSE(set.has(cpu + 1));
  CHECK_FALSE(set.has(cpu - 1));
  CHECK(set.count() == 1);
  CHECK(set.size_bytes() * 8 > static_cast<std::size_t>(cpu));
  CHECK(cpu_list(set) == std::to_string(cpu));
  const CpuSet every = set.every_cpu();
  CHECK(every.size_bytes() == set.size_bytes());
  CHECK(every.count() == static_cast<int>(8 * set.size_bytes()));
  CHECK(set == CpuSet::of_cpu(cpu));
  CHECK_FALSE(set == every);
}

TEST_CASE("a pin puts a thread on the pinner's CPU only when the thread's own set has it",
          "[protocol][cpu]") {
  const CpuSet own = CpuSet::of_calling_thread();
  REQUIRE_FALSE(own.empty());
  TEST_SKIP_UNLESS(own.count() >= 2, "one CPU only: no pin can move anything");
  const int here = cpu_of(own);
  const int there = cpu_of(own, here);
  REQUIRE(CpuSet::of_cpu(here).apply_to_calling_thread() == 0);  // sched_getcpu() == here
  REQUIRE(sched_getcpu() == here);

  const bool restricted = GENERATE(false, true);  // the thread keeps to `there` alone
  std::promise<pid_t> started;
  std::promise<void> done;
  std::thread sleeper([&, restricted] {
    if (restricted) CpuSet::of_cpu(there).apply_to_calling_thread();
    started.set_value(gettid());
    done.get_future().wait();
  });
  const pid_t tid = started.get_future().get();
  const bool pinned = detail::pin_task_to_current_cpu(tid);
  const std::string after = cpu_list(CpuSet::of_task(tid));
  done.set_value();
  sleeper.join();
  own.apply_to_calling_thread();

  if (restricted) {
    CHECK_FALSE(pinned);
    CHECK(after == std::to_string(there));
  } else {
    CHECK(pinned);
    CHECK(after == std::to_string(here));
  }
}

TEST_CASE("a give-back the kernel refuses widens the thread to every CPU, off the pin",
          "[protocol][cpu]") {
  const CpuSet own = CpuSet::of_calling_thread();
  REQUIRE_FALSE(own.empty());
  TEST_SKIP_UNLESS(!own.has(kAbsentCpu), "this machine has CPU " << kAbsentCpu);
  TEST_SKIP_UNLESS(own.count() >= 2, "one CPU only: a pin is the whole set");
  CpuGiveBack given;
  CpuSet after;
  int pin_error = -1;  // no Catch2 assertion off the test's thread
  std::thread pinned([&] {
    pin_error = CpuSet::of_cpu(sched_getcpu()).apply_to_calling_thread();
    // The set from before the pin, as if the cpuset had lost every CPU of it since.
    given = detail::give_back_cpus(CpuSet::of_cpu(kAbsentCpu));
    after = CpuSet::of_calling_thread();
  });
  pinned.join();
  REQUIRE(pin_error == 0);
  CHECK(given.how == CpuGiveBack::How::kWidened);
  CHECK(given.error_number == EINVAL);
  INFO("own " << cpu_list(own) << ", after the give-back " << cpu_list(after));
  CHECK(after.count() >= own.count());
  for (int cpu = 0; cpu < static_cast<int>(8 * own.size_bytes()); ++cpu)
    if (own.has(cpu)) CHECK(after.has(cpu));
}

TEST_CASE("a give-back of the thread's own set restores it exactly", "[protocol][cpu]") {
  const CpuSet own = CpuSet::of_calling_thread();
  REQUIRE_FALSE(own.empty());
  CpuGiveBack given{CpuGiveBack::How::kFailed, -1};
  CpuSet after;
  int pin_error = -1;
  std::thread pinned([&] {
    pin_error = CpuSet::of_cpu(sched_getcpu()).apply_to_calling_thread();
    given = detail::give_back_cpus(own);
    after = CpuSet::of_calling_thread();
  });
  pinned.join();
  REQUIRE(pin_error == 0);
  CHECK(given.how == CpuGiveBack::How::kRestored);
  CHECK(given.error_number == 0);
  CHECK(after == own);
}

// In a forked copy (the filter stays with it): pinned, then sched_setaffinity forbidden.
// Exit 0: kFailed with EPERM, still on one CPU; 3: no filter here; 2: anything else.
int give_back_under_a_forbidding_policy() {
  const CpuSet own = CpuSet::of_calling_thread();
  if (CpuSet::of_cpu(sched_getcpu()).apply_to_calling_thread() != 0) return 2;
  if (!refuse_sched_setaffinity(Refused::kAll)) return 3;
  const CpuGiveBack given = detail::give_back_cpus(own);
  return given.how == CpuGiveBack::How::kFailed && given.error_number == EPERM &&
                 CpuSet::of_calling_thread().count() == 1
             ? 0
             : 2;
}

TEST_CASE("a give-back the kernel forbids is reported as failed, with its errno",
          "[protocol][cpu]") {
  const ForkedCopy copy = run_in_forked_copy([](int) { return give_back_under_a_forbidding_policy(); });
  REQUIRE(WIFEXITED(copy.status));
  TEST_SKIP_UNLESS(WEXITSTATUS(copy.status) != 3, "no seccomp filter could be installed here");
  CHECK(WEXITSTATUS(copy.status) == 0);
}

}  // namespace
}  // namespace spawnpool::test
