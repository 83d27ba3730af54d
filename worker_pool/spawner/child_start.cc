#include "worker_pool/spawner/child_start.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include "worker_pool/cgroup/cgroup_join.h"
#include "worker_pool/protocol/monotonic_clock.h"

// The child's code runs on the parent's memory with the parent's thread pointer: no
// sanitizer instrumentation there (its runtime state belongs to the suspended parent).
#if defined(__clang__) || defined(__GNUC__)
#define SPAWNPOOL_NO_SANITIZE \
  __attribute__((no_sanitize("address", "thread", "undefined"), noinline))
#else
#define SPAWNPOOL_NO_SANITIZE
#endif

#if defined(__SANITIZE_THREAD__)
#define SPAWNPOOL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPAWNPOOL_TSAN 1
#endif
#endif

namespace spawnpool::detail {
namespace {


constexpr std::size_t kSigsetBytes = _NSIG / 8;  // the kernel's sigset_t
constexpr std::size_t kChildStackBytes = 64 * 1024;

int g_signals_to_reset[_NSIG];
int g_signal_count = 0;

// What the child reports when it cannot reach exec; it shares the parent's memory.
struct ChildFailure {
  FailureStage stage = FailureStage::kNone;
  int error_number = 0;
  int cgroup_error = 0;  // join_cgroup_from_child()'s result
  int cpu_set_error = 0;  // set_cpus_from_child()'s result
};

struct ChildArgs {
  const ChildSetup* setup;
  volatile ChildFailure* failure;
};

[[noreturn]] SPAWNPOOL_NO_SANITIZE void child_fails(ChildArgs& args, FailureStage stage) {
  args.failure->error_number = errno;
  args.failure->stage = stage;
  syscall(SYS_exit, 127);
  __builtin_unreachable();
}

// Makes `from` the child's fd `to`, open across exec.
SPAWNPOOL_NO_SANITIZE bool move_fd(int from, int to) {
  if (from == to) return syscall(SYS_fcntl, to, F_SETFD, 0) == 0;
  return syscall(SYS_dup3, from, to, 0) == to;
}

// The child's CPU set, with the give_back_cpus() fallback (cpu_affinity.h) in raw calls:
// a set the kernel refuses now (a cpuset changed under us) becomes every CPU the cpuset
// allows, never the one CPU of the same-CPU pin. 0, or the errno of the refusal.
SPAWNPOOL_NO_SANITIZE int set_cpus_from_child(const ChildSetup& setup) {
  if (syscall(SYS_sched_setaffinity, 0, setup.cpus_bytes, setup.cpus) == 0) return 0;
  const int refused = errno;
  if (setup.every_cpu &&
      syscall(SYS_sched_setaffinity, 0, setup.cpus_bytes, setup.every_cpu) == 0)
    return 0;
  return refused;
}

SPAWNPOOL_NO_SANITIZE int child_main(void* raw_args) {
  ChildArgs& args = *static_cast<ChildArgs*>(raw_args);
  const ChildSetup& setup = *args.setup;
  // First, so that no spawner death leaves the command running unseen: until the
  // spawner has published the command's pid, the driver could not end it.
  if (setup.parent_pid > 0) {
    syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (syscall(SYS_getppid) != setup.parent_pid) syscall(SYS_exit, 127);  // already gone
  }
  // Before anything it could fork or allocate: from here on the slot's cgroup counts all
  // of the command (one raw write; the program's own memory is charged after exec).
  if (setup.cgroup_procs_fd >= 0)
    args.failure->cgroup_error = join_cgroup_from_child(setup.cgroup_procs_fd);
  // A kernel sigaction of zeroes on every architecture: SIG_DFL, no flags, empty mask.
  // Signals are all blocked (start_child), so no handler of the parent's runs here.
  const unsigned long default_action[8] = {};
  for (int i = 0; i < g_signal_count; ++i)
    syscall(SYS_rt_sigaction, g_signals_to_reset[i], default_action, nullptr, kSigsetBytes);
  if (syscall(SYS_setpgid, 0, 0) != 0) child_fails(args, FailureStage::kSpawner);
  if (!move_fd(setup.stdin_fd, 0)) child_fails(args, FailureStage::kSpawner);
  if (setup.stdout_fd >= 0 && !move_fd(setup.stdout_fd, 1))
    child_fails(args, FailureStage::kSpawner);
  if (setup.stderr_fd >= 0 && !move_fd(setup.stderr_fd, 2))
    child_fails(args, FailureStage::kSpawner);
  if (setup.cwd && syscall(SYS_chdir, setup.cwd) != 0) child_fails(args, FailureStage::kChdir);
  if (setup.close_extra_fds && syscall(SYS_close_range, 3, ~0U, 0) != 0)
    child_fails(args, FailureStage::kSpawner);
  // Not fatal: the program runs; the parent hears of it and widens it from outside.
  if (setup.cpus) args.failure->cpu_set_error = set_cpus_from_child(setup);
  // Checked: a program started with every signal blocked would ignore Ctrl-C and the
  // pool's cancels (SIGTERM, SIGINT) for its whole life.
  const unsigned long no_signals[8] = {};
  if (syscall(SYS_rt_sigprocmask, SIG_SETMASK, no_signals, nullptr, kSigsetBytes) != 0)
    child_fails(args, FailureStage::kSpawner);
  syscall(SYS_execve, setup.path, setup.argv, setup.envp);
  child_fails(args, FailureStage::kExec);
}

// The child's stack, made once: the parent is suspended while the child runs, so one
// stack serves every launch of this (single launching thread) process.
char* child_stack_top() {
  static char* const top = [] () -> char* {
    const std::size_t guard = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* base = mmap(nullptr, guard + kChildStackBytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED) return nullptr;
    // Stacks grow down: an overflow faults rather than corrupts. No guard, no launches.
    if (mprotect(base, guard, PROT_NONE) != 0) {
      munmap(base, guard + kChildStackBytes);
      return nullptr;
    }
    return static_cast<char*>(base) + guard + kChildStackBytes;
  }();
  return top;
}

using CloneFunction = int (*)(int (*)(void*), void*, int, void*, ...);

// glibc's clone. ThreadSanitizer intercepts clone as a fork and resets its runtime state
// in the child, which under CLONE_VM is the parent's own (every later lock then looks
// like a race); in a TSan build the call goes to glibc directly.
CloneFunction libc_clone() {
#ifdef SPAWNPOOL_TSAN
  static const CloneFunction function = [] {
    void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    void* symbol = libc ? dlsym(libc, "clone") : nullptr;
    return symbol ? reinterpret_cast<CloneFunction>(symbol) : &clone;
  }();
  return function;
#else
  return &clone;
#endif
}

ChildStart failed(FailureStage stage, int error_number) {
  ChildStart out;
  out.failure = stage;
  out.error_number = error_number;
  return out;
}

}  // namespace

// The signals whose disposition is not the default here, which the child puts back (with
// posix_spawn's SETSIGDEF that was every signal, one system call each).
void note_signals_to_reset() {
  g_signal_count = 0;
  for (int sig = 1; sig < _NSIG; ++sig) {
    if (sig == SIGKILL || sig == SIGSTOP) continue;
    struct sigaction current {};
    // glibc refuses its own signals (SIGCANCEL, SIGSETXID): reset those whatever they are.
    if (sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL)
      g_signals_to_reset[g_signal_count++] = sig;
  }
}

namespace {

void note_signals_once() {
  static const bool signals_noted = (note_signals_to_reset(), true);
  (void)signals_noted;
}

}  // namespace

void prepare_child_start() {
  (void)child_stack_top();
  note_signals_once();
}

ChildStart start_child(const ChildSetup& setup) {
  char* const stack = child_stack_top();
  if (stack == nullptr) return failed(FailureStage::kSpawner, ENOMEM);
  note_signals_once();
  volatile ChildFailure failure;
  ChildArgs args{&setup, &failure};
  // Every signal blocked, glibc's own included (hence the raw call), until the child has
  // put dispositions back to default: a handler of ours must never run in the child.
  const unsigned long all_signals[8] = {~0UL, ~0UL, ~0UL, ~0UL, ~0UL, ~0UL, ~0UL, ~0UL};
  unsigned long saved[8] = {};
  const std::int64_t launch_ns = monotonic_ns();
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, all_signals, saved, kSigsetBytes);
  const pid_t pid = libc_clone()(child_main, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
  const int clone_error = errno;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, saved, nullptr, kSigsetBytes);
  ChildStart started;
  if (pid < 0) {
    started = failed(FailureStage::kSpawner, clone_error);
  } else if (failure.stage != FailureStage::kNone) {
    // CLONE_VFORK: the child has executed the program or exited by now.
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    started = failed(failure.stage, failure.error_number);
  } else {
    started.pid = pid;
  }
  started.cgroup_join_error = failure.cgroup_error;
  started.cpu_set_error = failure.cpu_set_error;
  started.launch_ns = launch_ns;
  return started;
}

}  // namespace spawnpool::detail
