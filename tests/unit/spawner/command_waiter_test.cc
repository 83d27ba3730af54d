// wait_for_command: one CommandOutcome serves command after command (as in SlotServer),
// so what it reports must be the command's own: its status and output, or, when the
// reap itself fails, that failure with its errno, never the previous command's status.
// The commands are the exit_with and print_bytes helpers, started as the spawner starts
// them.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cerrno>

#include "tests/unit/spawner/spawner_test_support.h"
#include "worker_pool/spawner/child_start.h"
#include "worker_pool/spawner/command_waiter.h"
#include "worker_pool/spawner/running_child.h"

namespace spawnpool::test {
namespace {

// Starts `child` uncaptured (its output goes to the helper's pipe): the waiter then only
// waits and reaps.
detail::LaunchedCommand start(HelperChild& child) {
  detail::LaunchedCommand command;
  command.pid = detail::start_child(child.setup()).pid;
  return command;
}

TEST_CASE("each command's outcome is its own exit status", "[spawner][waiter]") {
  detail::RunningChild running;
  detail::CommandOutcome outcome;
  HelperChild first("exit_with", {"3"});
  detail::LaunchedCommand command = start(first);
  REQUIRE(command.pid > 0);
  REQUIRE(detail::wait_for_command(command, running, outcome));
  CHECK(WIFEXITED(outcome.wait_status));
  CHECK(WEXITSTATUS(outcome.wait_status) == 3);
  CHECK(outcome.reap_error == 0);

  HelperChild second("exit_with", {"0"});
  command = start(second);
  REQUIRE(command.pid > 0);
  REQUIRE(detail::wait_for_command(command, running, outcome));
  CHECK(outcome.wait_status == 0);
  CHECK(no_children());
}

TEST_CASE("a command that cannot be reaped reports the failure, not the last status",
          "[spawner][waiter]") {
  detail::RunningChild running;
  detail::CommandOutcome outcome;
  HelperChild first("exit_with", {"3"});
  detail::LaunchedCommand command = start(first);
  REQUIRE(command.pid > 0);
  REQUIRE(detail::wait_for_command(command, running, outcome));
  REQUIRE(WEXITSTATUS(outcome.wait_status) == 3);

  // Someone else reaps the next command first (as a SIGCHLD set to SIG_IGN would): the
  // waiter's wait4 fails with ECHILD.
  HelperChild second("exit_with", {"0"});
  command = start(second);
  REQUIRE(command.pid > 0);
  REQUIRE(reap(command.pid) == 0);
  CHECK_FALSE(detail::wait_for_command(command, running, outcome));
  CHECK(outcome.reap_error == ECHILD);
  CHECK(outcome.wait_status == 0);  // no status, rather than the first command's exit 3
  CHECK(outcome.exited_ns > 0);
  CHECK(no_children());
}

}  // namespace
}  // namespace spawnpool::test
