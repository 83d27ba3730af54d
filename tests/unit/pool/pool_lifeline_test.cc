// The lifeline between the driver and a spawner under stress: a cancel sent while the
// socket is full (the spawner stopped, hundreds of messages queued) still reaches its
// command once the spawner reads again; a spawner whose watch thread cannot poll (its
// RLIMIT_NOFILE lowered below the two fds it polls: EINVAL) does not spin on the error,
// and serves cancels again once the limit is back.
#include <signal.h>
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <thread>

#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

using namespace std::chrono_literals;

// User + system CPU of `pid` so far, in clock ticks.
long cpu_ticks(int pid) {
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream rest(text.substr(paren + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

TEST_CASE("a cancel sent while the lifeline is full is delivered, not dropped",
          "[pool][lifeline]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const int spawner = pool.spawner_pids().at(0);
    Job job = pool.submit(helper_command("sleep_ms", {"20000"}));
    std::this_thread::sleep_for(200ms);  // the command runs
    REQUIRE(kill(spawner, SIGSTOP) == 0);
    // Far more than a socket buffer holds; SIGCONT does the command no harm.
    for (int i = 0; i < 2000; ++i) pool.cancel(job, SIGCONT);
    pool.cancel(job, SIGTERM);
    REQUIRE(kill(spawner, SIGCONT) == 0);
    const auto begin = std::chrono::steady_clock::now();
    const Result result = pool.wait(job);
    CHECK(result.returncode == -SIGTERM);
    CHECK(std::chrono::steady_clock::now() - begin < 10s);  // not the 20 s sleep
  }
  leaks.verify();
}

TEST_CASE("a watch thread that cannot poll waits between tries instead of spinning",
          "[pool][lifeline]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const int spawner = pool.spawner_pids().at(0);
    Job job = pool.submit(helper_command("sleep_ms", {"20000"}));
    std::this_thread::sleep_for(200ms);
    rlimit old_limit{};
    REQUIRE(prlimit(spawner, RLIMIT_NOFILE, nullptr, &old_limit) == 0);
    const rlimit one{1, old_limit.rlim_max};
    REQUIRE(prlimit(spawner, RLIMIT_NOFILE, &one, nullptr) == 0);
    pool.cancel(job, SIGCONT);  // wakes the watch thread: its next poll() fails
    std::this_thread::sleep_for(100ms);
    const long before = cpu_ticks(spawner);
    std::this_thread::sleep_for(2s);
    const long used = cpu_ticks(spawner) - before;
    const long ticks_per_second = sysconf(_SC_CLK_TCK);
    INFO("spawner CPU over 2 s of failing polls: " << used << " ticks of 1/"
                                                   << ticks_per_second << " s");
    CHECK(used < ticks_per_second / 20);  // spinning takes whatever CPU it gets
    REQUIRE(prlimit(spawner, RLIMIT_NOFILE, &old_limit, nullptr) == 0);
    pool.cancel(job, SIGTERM);
    const Result result = pool.wait(job);
    CHECK(result.returncode == -SIGTERM);
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
