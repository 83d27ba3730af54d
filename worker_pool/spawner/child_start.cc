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

// struct clone_args up to `cgroup` (CLONE_ARGS_SIZE_VER2, kernel 5.7), spelled out here so
// that the build does not depend on the kernel headers' age.
struct CloneArgs {
  std::uint64_t flags = 0;
  std::uint64_t pidfd = 0;
  std::uint64_t child_tid = 0;
  std::uint64_t parent_tid = 0;
  std::uint64_t exit_signal = 0;
  std::uint64_t stack = 0;  // the lowest address; the kernel starts the child at the top
  std::uint64_t stack_size = 0;
  std::uint64_t tls = 0;
  std::uint64_t set_tid = 0;
  std::uint64_t set_tid_size = 0;
  std::uint64_t cgroup = 0;
};
static_assert(sizeof(CloneArgs) == 88, "struct clone_args, version 2");
constexpr std::uint64_t kCloneIntoCgroup = 0x200000000ULL;  // CLONE_INTO_CGROUP
#ifndef SYS_clone3
#define SYS_clone3 435
#endif

// clone3 for a child that shares our memory: the child returns from the system call on
// its own stack (the kernel set its stack pointer to the top of `args->stack`), so it
// must not return from here into our frame. It calls fn(arg) instead and exits with its
// result (child_main never returns: it executes the program or exits). fn and arg ride
// in callee-saved registers, which the child gets as the parent had them. Returns the
// child's pid, or -errno, in the parent only.
#if defined(__x86_64__)
SPAWNPOOL_NO_SANITIZE long clone3_on_own_stack(CloneArgs* args, int (*fn)(void*), void* arg) {
  long result;
  register int (*in_r12)(void*) asm("r12") = fn;
  register void* in_r13 asm("r13") = arg;
  asm volatile(
      "syscall\n\t"
      "testq %%rax, %%rax\n\t"
      "jnz 1f\n\t"
      // The child: a fresh frame chain, an aligned stack, fn(arg), exit(its result).
      "xorl %%ebp, %%ebp\n\t"
      "andq $-16, %%rsp\n\t"
      "movq %%r13, %%rdi\n\t"
      "callq *%%r12\n\t"
      "movl %%eax, %%edi\n\t"
      "movl %[exit_nr], %%eax\n\t"
      "syscall\n\t"
      "ud2\n\t"
      "1:\n\t"
      : "=a"(result)
      : "0"(static_cast<long>(SYS_clone3)), "D"(args), "S"(sizeof(CloneArgs)), "r"(in_r12),
        "r"(in_r13), [exit_nr] "i"(SYS_exit)
      : "rcx", "r11", "memory", "cc");
  return result;
}
constexpr bool kHaveClone3Trampoline = true;
#else
long clone3_on_own_stack(CloneArgs*, int (*)(void*), void*) { return -ENOSYS; }
constexpr bool kHaveClone3Trampoline = false;
#endif

// clone(CLONE_VM | CLONE_VFORK) into the cgroup open at `cgroup_fd`, on `stack_top`. The
// pid, or -1 with errno.
pid_t clone_into_cgroup(int (*fn)(void*), void* arg, char* stack_top, int cgroup_fd) {
  if (!kHaveClone3Trampoline) {
    errno = ENOSYS;
    return -1;
  }
  CloneArgs args;
  args.flags = CLONE_VM | CLONE_VFORK | kCloneIntoCgroup;
  args.exit_signal = SIGCHLD;
  args.stack = reinterpret_cast<std::uint64_t>(stack_top - kChildStackBytes);
  args.stack_size = kChildStackBytes;
  args.cgroup = static_cast<std::uint64_t>(cgroup_fd);
  const long result = clone3_on_own_stack(&args, fn, arg);
  if (result >= 0) return static_cast<pid_t>(result);
  errno = static_cast<int>(-result);
  return -1;
}

SPAWNPOOL_NO_SANITIZE int exit_at_once(void*) {
  syscall(SYS_exit, 0);
  __builtin_unreachable();
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

int probe_clone_into_cgroup(int cgroup_dir_fd) {
  char* const stack = child_stack_top();
  if (stack == nullptr) return ENOMEM;
  const unsigned long all_signals[8] = {~0UL, ~0UL, ~0UL, ~0UL, ~0UL, ~0UL, ~0UL, ~0UL};
  unsigned long saved[8] = {};
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, all_signals, saved, kSigsetBytes);
  const pid_t pid = clone_into_cgroup(exit_at_once, nullptr, stack, cgroup_dir_fd);
  const int error = pid < 0 ? errno : 0;
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, saved, nullptr, kSigsetBytes);
  if (pid > 0)
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  return error;
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
  pid_t pid = -1;
  if (setup.cgroup_dir_fd >= 0) {
    pid = clone_into_cgroup(child_main, &args, stack, setup.cgroup_dir_fd);
    // Refused (the spawner's probe said it works, so this is the cgroup: removed, full):
    // the command still runs, outside it, measured by ru_maxrss.
    if (pid < 0) failure.cgroup_error = errno;
  }
  if (pid < 0)
    pid = libc_clone()(child_main, stack, CLONE_VM | CLONE_VFORK | SIGCHLD, &args);
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
