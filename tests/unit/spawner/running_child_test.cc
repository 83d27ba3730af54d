// RunningChild, the handshake between the spawner's two threads: a signal meant for a
// request reaches that request's command whether it arrives while the command runs or
// before its launch, never the next command; after stop() nothing launches. The commands
// are the sleep_ms and exit_with helpers, started as the spawner starts them.
#include <signal.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>

#include "tests/unit/spawner/spawner_test_support.h"
#include "worker_pool/spawner/child_start.h"
#include "worker_pool/spawner/running_child.h"

namespace spawnpool::test {
namespace {

// Launches a helper as request `number` through `running`; its pid, or -1.
pid_t launch(detail::RunningChild& running, std::uint32_t number, HelperChild& child,
             bool& launched) {
  pid_t pid = -1;
  launched = running.launch(number, [&] {
    pid = detail::start_child(child.setup()).pid;
    return pid;
  });
  return pid;
}

bool killed_by(int status, int sig) { return WIFSIGNALED(status) && WTERMSIG(status) == sig; }

TEST_CASE("a signal for the running request reaches its command's group",
          "[spawner][running]") {
  detail::RunningChild running;
  HelperChild child("sleep_ms", {"30000"});
  bool launched = false;
  const pid_t pid = launch(running, 1, child, launched);
  REQUIRE(launched);
  REQUIRE(pid > 0);
  running.signal_group(SIGTERM, 2);  // a later request's: kept, not sent
  running.signal_group(SIGTERM, 1);
  CHECK(killed_by(reap(pid), SIGTERM));
  running.clear();
  CHECK(no_children());
}

TEST_CASE("a signal sent before its request's launch is delivered at the launch",
          "[spawner][running]") {
  detail::RunningChild running;
  running.signal_group(SIGTERM, 7);
  HelperChild child("sleep_ms", {"30000"});
  bool launched = false;
  const pid_t pid = launch(running, 7, child, launched);
  REQUIRE(pid > 0);
  CHECK(killed_by(reap(pid), SIGTERM));
  running.clear();
}

TEST_CASE("a signal for an ended request never reaches the next command",
          "[spawner][running]") {
  detail::RunningChild running;
  bool launched = false;
  HelperChild first("exit_with", {"0"});
  const pid_t first_pid = launch(running, 1, first, launched);
  REQUIRE(first_pid > 0);
  CHECK(reap(first_pid) == 0);
  running.clear();
  running.signal_group(SIGKILL, 1);  // late: request 1 is over

  HelperChild next("sleep_ms", {"100"});
  const pid_t next_pid = launch(running, 2, next, launched);
  REQUIRE(next_pid > 0);
  CHECK(reap(next_pid) == 0);  // ran to its end
  running.clear();
}

TEST_CASE("after stop nothing is launched", "[spawner][running]") {
  detail::RunningChild running;
  HelperChild child("sleep_ms", {"30000"});
  bool launched = false;
  const pid_t pid = launch(running, 1, child, launched);
  REQUIRE(pid > 0);
  running.stop(SIGKILL);  // the driver is gone: the command is killed with its group
  CHECK(killed_by(reap(pid), SIGKILL));
  HelperChild late("exit_with", {"0"});
  CHECK(launch(running, 2, late, launched) == -1);
  CHECK_FALSE(launched);
  CHECK(no_children());
}

}  // namespace
}  // namespace spawnpool::test
