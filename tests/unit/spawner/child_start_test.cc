// start_child: clone + exec of a command, with what the child does before exec. The
// child_state helper reports what it got: its own process group, every signal at its
// default and none blocked (whatever the parent had), fds 0-2 only, the parent-death
// signal, the CPU set it was given. Launch failures come back with their stage and errno,
// the failed child reaped, the last signal-mask call's too (under a seccomp filter).
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>

#include <catch2/catch.hpp>
#include <string>

#include "tests/unit/spawner/spawner_test_support.h"
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
  REQUIRE(detail::pin_task_to_current_cpu(gettid(), own.first_64_cpus()));
  HelperChild child("child_state");
  child.setup().cpus = own.data();
  child.setup().cpus_bytes = own.size_bytes();
  const detail::ChildStart started = detail::start_child(child.setup());
  own.apply_to_calling_thread();
  REQUIRE(started.pid > 0);
  const auto state = parse_lines(child.read_output());
  CHECK(reap(started.pid) == 0);
  std::string expected;
  for (int cpu = 0; cpu < 64; ++cpu)
    if (own.first_64_cpus() >> cpu & 1) expected += (expected.empty() ? "" : ",") + std::to_string(cpu);
  CHECK(state.at("cpus") == expected);
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
  const std::uint32_t kArch =
#if defined(__x86_64__)
      AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
      AUDIT_ARCH_AARCH64;
#else
      0;
#endif
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_rt_sigprocmask, 0, 7),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SIG_SETMASK, 0, 5),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2]) + 4),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  const sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]),
                           filter};
  if (kArch == 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0)
    return 3;
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
  const pid_t copy = fork();
  REQUIRE(copy >= 0);
  if (copy == 0) _exit(launch_with_failing_unblock());
  const int status = reap(copy);
  REQUIRE(WIFEXITED(status));
  TEST_SKIP_UNLESS(WEXITSTATUS(status) != 3, "no seccomp filter could be installed here");
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(no_children());
}

}  // namespace
}  // namespace spawnpool::test
