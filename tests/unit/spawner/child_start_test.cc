// start_child: clone + exec of a command, with what the child does before exec. The
// child_state helper reports what it got: its own process group, every signal at its
// default and none blocked (whatever the parent had), fds 0-2 only, the parent-death
// signal, the CPU set it was given (every CPU of its cpuset when that set is refused; a
// refusal under a seccomp filter is reported, not fatal). Launch failures come back with
// their stage and errno, the failed child reaped, the last signal-mask call's too (under
// a seccomp filter).
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <sstream>

#include <catch2/catch.hpp>
#include <string>

#include "tests/unit/spawner/spawner_test_support.h"
#include "tests/unit/support/cpu_test_support.h"
#include "tests/unit/support/test_skip.h"
#include "worker_pool/spawner/child_start.h"
#include "worker_pool/protocol/cpu_affinity.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::test {
namespace {

void ignore_handler(int) {}

// Dirty signal state in the parent for the duration of a test: SIGPIPE ignored, SIGUSR2
// handled, SIGUSR1 blocked; start_child() is told (note_signals_to_reset).
class DirtySignals {
 public:
  DirtySignals() {
    struct sigaction ignore {}, handle {};
    ignore.sa_handler = SIG_IGN;
    handle.sa_handler = ignore_handler;
    sigaction(SIGPIPE, &ignore, &old_pipe_);
    sigaction(SIGUSR2, &handle, &old_usr2_);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    pthread_sigmask(SIG_BLOCK, &usr1, &old_mask_);
    detail::note_signals_to_reset();
  }
  ~DirtySignals() {
    sigaction(SIGPIPE, &old_pipe_, nullptr);
    sigaction(SIGUSR2, &old_usr2_, nullptr);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    detail::note_signals_to_reset();
  }

 private:
  struct sigaction old_pipe_ {}, old_usr2_ {};
  sigset_t old_mask_{};
};

TEST_CASE("a child starts clean: own group, default signals, empty mask, fds 0-2",
          "[spawner][child]") {
  DirtySignals dirty;
  const int leaked = dup(2);  // an fd without close-on-exec: close_range must catch it
  REQUIRE(leaked >= 3);
  HelperChild child("child_state");
  child.setup().close_extra_fds = true;
  child.setup().parent_pid = getpid();
  const std::int64_t before = detail::monotonic_ns();
  const detail::ChildStart started = detail::start_child(child.setup());
  REQUIRE(started.pid > 0);
  CHECK(started.failure == FailureStage::kNone);
  CHECK(started.launch_ns >= before);
  CHECK(started.launch_ns <= detail::monotonic_ns());
  const auto state = parse_lines(child.read_output());
  CHECK(reap(started.pid) == 0);
  close(leaked);

  CHECK(state.at("pid") == std::to_string(started.pid));
  CHECK(state.at("pgid") == std::to_string(started.pid));
  CHECK(state.at("ppid") == std::to_string(getpid()));
  CHECK(state.at("blocked").empty());
  CHECK(state.at("ignored").empty());
  CHECK(state.at("handled").empty());
  CHECK(state.at("fds") == "0,1,2");
  CHECK(state.at("stdin") == "/dev/null");
  CHECK(state.at("pdeathsig") == std::to_string(SIGKILL));
  CHECK(no_children());
}

TEST_CASE("a child gets the CPU set it is given before exec", "[spawner][child][cpu]") {
  const detail::CpuSet own = detail::CpuSet::of_calling_thread();
  REQUIRE_FALSE(own.empty());
  if (CPU_COUNT_S(own.size_bytes(), own.data()) < 2) {
    WARN("one CPU only: nothing to widen");
    return;
  }
  // Pinned to the current CPU, as the spawner is for the same-CPU hand-off.
  REQUIRE(detail::pin_task_to_current_cpu(gettid()));
  HelperChild child("child_state");
  child.setup().cpus = own.data();
  child.setup().cpus_bytes = own.size_bytes();
  const detail::ChildStart started = detail::start_child(child.setup());
  own.apply_to_calling_thread();
  REQUIRE(started.pid > 0);
  const auto state = parse_lines(child.read_output());
  CHECK(reap(started.pid) == 0);
  std::string expected;
  CHECK(state.at("cpus") == cpu_list(own));
}

// The set every_cpu() becomes for this thread (the kernel narrows it to the cpuset).
detail::CpuSet every_cpu_allowed_here() {
  const detail::CpuSet own = detail::CpuSet::of_calling_thread();
  own.every_cpu().apply_to_calling_thread();
  const detail::CpuSet every = detail::CpuSet::of_calling_thread();
  own.apply_to_calling_thread();
  return every;
}

TEST_CASE("a child refused its CPU set gets every CPU of its cpuset, never the pin",
          "[spawner][child][cpu]") {
  const detail::CpuSet own = detail::CpuSet::of_calling_thread();
  REQUIRE_FALSE(own.empty());
  TEST_SKIP_UNLESS(own.count() >= 2, "one CPU only: a pin is the whole set");
  TEST_SKIP_UNLESS(!own.has(kAbsentCpu), "this machine has CPU " << kAbsentCpu);
  const std::string expected = cpu_list(every_cpu_allowed_here());
  // The spawner's set from start-up, as if its cpuset had lost every CPU of it since.
  const detail::CpuSet gone = detail::CpuSet::of_cpu(kAbsentCpu);
  const detail::CpuSet every = gone.every_cpu();
  REQUIRE(detail::pin_task_to_current_cpu(gettid()));
  HelperChild child("child_state");
  child.setup().cpus = gone.data();
  child.setup().every_cpu = every.data();
  child.setup().cpus_bytes = gone.size_bytes();
  const detail::ChildStart started = detail::start_child(child.setup());
  own.apply_to_calling_thread();
  REQUIRE(started.pid > 0);
  CHECK(started.cpu_set_error == 0);
  const auto state = parse_lines(child.read_output());
  CHECK(reap(started.pid) == 0);
  CHECK(state.at("cpus") == expected);
  CHECK(no_children());
}

// In a forked copy: pinned, then sched_setaffinity forbidden (all of it, or on itself
// only, so that the spawner can still widen the command from outside). Writes the
// command's CPU list and the two errnos to `out_fd`; exit 3 when no filter could be
// installed, 2 when the launch failed.
int launch_pinned_under_a_policy(Refused which, int out_fd) {
  const detail::CpuSet own = detail::CpuSet::of_calling_thread();
  if (!detail::pin_task_to_current_cpu(gettid())) return 2;
  const int pinned_cpu = sched_getcpu();
  if (!refuse_sched_setaffinity(which)) return 3;
  // The command's set is read from here once the widening is done: the command itself
  // (child_state) could read it before the spawner widened it, as a loaded machine
  // showed ("1" for "0,1"). It sleeps so that it is still there to be read.
  HelperChild child("sleep_ms", {"300"});
  const detail::CpuSet every = own.every_cpu();
  child.setup().cpus = own.data();
  child.setup().every_cpu = every.data();
  child.setup().cpus_bytes = own.size_bytes();
  const detail::ChildStart started = detail::start_child(child.setup());
  if (started.pid <= 0) return 2;
  int widened_from_outside = 0;
  if (started.cpu_set_error && own.apply_to(started.pid) != 0) widened_from_outside = errno;
  const std::string command_cpus = cpu_list(detail::CpuSet::of_task(started.pid));
  reap(started.pid);
  const std::string line = std::to_string(pinned_cpu) + " " + command_cpus + " " +
                           std::to_string(started.cpu_set_error) + " " +
                           std::to_string(widened_from_outside);
  return write(out_fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) ? 0 : 2;
}

TEST_CASE("a child forbidden its CPU set runs, and says so for its parent to widen it",
          "[spawner][child][cpu]") {
  const detail::CpuSet own = detail::CpuSet::of_calling_thread();
  REQUIRE_FALSE(own.empty());
  TEST_SKIP_UNLESS(own.count() >= 2, "one CPU only: a pin is the whole set");
  const Refused which = GENERATE(Refused::kOnItself, Refused::kAll);
  const ForkedCopy copy =
      run_in_forked_copy([&](int out_fd) { return launch_pinned_under_a_policy(which, out_fd); });
  REQUIRE(WIFEXITED(copy.status));
  TEST_SKIP_UNLESS(WEXITSTATUS(copy.status) != 3, "no seccomp filter could be installed here");
  REQUIRE(WEXITSTATUS(copy.status) == 0);
  std::istringstream fields(copy.output);
  std::string pinned_cpu, cpus;
  int child_error = -1, outside_error = -1;
  REQUIRE(fields >> pinned_cpu >> cpus >> child_error >> outside_error);
  // The child reports EPERM; from outside the set goes through unless that is refused
  // too, and then the command runs on the pinned CPU (the caller reports that).
  CHECK(child_error == EPERM);
  if (which == Refused::kAll) {
    CHECK(outside_error == EPERM);
    CHECK(cpus == pinned_cpu);
  } else {
    CHECK(outside_error == 0);
    CHECK(cpus == cpu_list(own));
  }
  CHECK(no_children());
}

TEST_CASE("a launch failure names its stage and errno, and leaves no child",
          "[spawner][child]") {
  HelperChild child("exit_with", {"0"});
  SECTION("a working directory that does not exist: chdir") {
    child.setup().cwd = "/nonexistent/spawnpool-test";
    const detail::ChildStart started = detail::start_child(child.setup());
    CHECK(started.pid == -1);
    CHECK(started.failure == FailureStage::kChdir);
    CHECK(started.error_number == ENOENT);
    CHECK(started.launch_ns > 0);
  }
  SECTION("a directory as the program: exec") {
    child.setup().path = "/";
    const detail::ChildStart started = detail::start_child(child.setup());
    CHECK(started.pid == -1);
    CHECK(started.failure == FailureStage::kExec);
    CHECK(started.error_number == EACCES);
  }
  CHECK(no_children());
}

// In a forked copy of this process (the filter stays with it): rt_sigprocmask(SIG_SETMASK,
// set, NULL), the child's last call before exec, fails with EPERM. The parent's own
// restore has the same form, so that copy ends with every signal blocked; it only
// reports and exits. Exit 0: the launch failed at kSpawner with EPERM; 1: the program
// ran (with every signal blocked); 2: anything else.
int launch_with_failing_unblock() {
  if (!refuse_with_eperm(SYS_rt_sigprocmask, {{0, SIG_SETMASK}, {2, 0}})) return 3;
  HelperChild child("exit_with", {"0"});
  const detail::ChildStart started = detail::start_child(child.setup());
  if (started.pid > 0) {
    reap(started.pid);
    return 1;
  }
  return started.failure == FailureStage::kSpawner && started.error_number == EPERM ? 0 : 2;
}

TEST_CASE("a child that cannot unblock its signals fails at the spawner stage, unstarted",
          "[spawner][child]") {
  const ForkedCopy copy = run_in_forked_copy([](int) { return launch_with_failing_unblock(); });
  REQUIRE(WIFEXITED(copy.status));
  TEST_SKIP_UNLESS(WEXITSTATUS(copy.status) != 3, "no seccomp filter could be installed here");
  CHECK(WEXITSTATUS(copy.status) == 0);
  CHECK(no_children());
}

}  // namespace
}  // namespace spawnpool::test
