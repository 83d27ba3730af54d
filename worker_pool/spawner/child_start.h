// Starting a command's process: clone(CLONE_VM | CLONE_VFORK) and exec, the way glibc's
// posix_spawn does it, with one thing posix_spawn cannot do: give the child its CPU set
// just before exec.
//
// Why not posix_spawn: with the same-CPU hand-off (cpu_affinity.h) the spawner runs
// pinned to the driver thread's CPU. A command started from there stays on that CPU,
// where the driver and the spawner are asleep, so no hand-off of the command's round trip
// has to wake another, halted, CPU: measured side by side, 1.00-1.03x the floor per
// command against 1.09-1.13x with the command placed by the scheduler (see "The CPU
// hint" in docs/architecture.md). But a child inherits its parent's mask, and
// posix_spawn has no attribute to widen it; widening it from the spawner after
// posix_spawn returns races with the program reading its own set at start-up (nproc,
// make, ninja, lld size their parallelism by it). The child here widens its own set
// before exec, so the program never sees the pin.
//
// With a command cgroup (v2, cgroup_slot.h) the clone is a raw clone3(CLONE_VM |
// CLONE_VFORK | CLONE_INTO_CGROUP) instead: the child is born in the command's fresh
// cgroup, so no write to cgroup.procs migrates it (that write has been measured at about
// 100 ms on v2 kernels since 6.0) and the cgroup's counters are the command's from its
// first page. glibc exports no clone3, and a raw one returns twice on the caller's stack;
// a small trampoline (x86-64 only; elsewhere kernels fall back as before 5.7) moves the
// child onto its own stack and into child_main, never back into the caller's frame.
//
// Between clone and exec the child makes raw system calls only (async-signal-safe, and
// out of reach of sanitizer interceptors): it shares the spawner's memory and the calling
// thread's TLS (errno included) on a stack of its own, and every signal stays blocked
// until its disposition is back to default.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "worker_pool/protocol/protocol.h"

namespace spawnpool::detail {

/// Everything the child does before exec, decided and allocated by the parent.
struct ChildSetup {
  const char* path = nullptr;         // what to execve
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;          // chdir() first when set
  int stdin_fd = -1;                  // becomes fd 0 (the spawner's /dev/null)
  int stdout_fd = -1;                 // becomes fd 1 when >= 0
  int stderr_fd = -1;                 // becomes fd 2 when >= 0
  bool close_extra_fds = false;       // close_range(3, ~0U) before exec
  const cpu_set_t* cpus = nullptr;    // the child's CPU set before exec, when set
  const cpu_set_t* every_cpu = nullptr;  // with cpus: tried when the kernel refuses cpus
  std::size_t cpus_bytes = 0;         // of cpus and every_cpu
  pid_t parent_pid = 0;               // when set: SIGKILL the child when this process dies
  int cgroup_procs_fd = -1;           // when >= 0: join that cgroup (its cgroup.procs) first
  // When >= 0 (instead of cgroup_procs_fd): the directory of the cgroup the child starts
  // in (clone3 CLONE_INTO_CGROUP). If the kernel refuses that, the child starts outside
  // it (cgroup_join_error says why).
  int cgroup_dir_fd = -1;
};

struct ChildStart {
  pid_t pid = -1;  // -1 when the child could not be started (it has been reaped)
  FailureStage failure = FailureStage::kNone;
  int error_number = 0;
  std::int64_t launch_ns = 0;  // CLOCK_MONOTONIC just before the clone; 0 if none was tried
  // With cgroup_procs_fd or cgroup_dir_fd: 0 when the child joined (started in) the
  // cgroup, else the errno of the write or of clone3 (not fatal: the command runs outside
  // it and is measured with ru_maxrss).
  int cgroup_join_error = 0;
  // With cpus: 0 when the child got cpus (or every_cpu), else the errno of the refusal
  // (not fatal: the program runs on the CPU set it inherited; the caller widens it).
  int cpu_set_error = 0;
};

/// Starts `setup.path`. Returns once the child has executed the program or failed to.
/// The child starts with every signal at its default disposition and none blocked; the
/// dispositions to reset are read on the first call (the spawner sets its own before).
/// Not thread-safe: one caller thread per process (the spawner's main thread).
ChildStart start_child(const ChildSetup& setup);

/// Does start_child()'s first-call work now (the child's stack, the signals to reset), so
/// that the first command does not pay for it. Call once the process's own signal
/// dispositions are set. Same thread as start_child(); idempotent.
void prepare_child_start();

/// Whether this kernel (and any seccomp filter) starts a child in a cgroup with
/// clone3(CLONE_INTO_CGROUP): starts one that exits at once in the cgroup whose directory
/// is open at `cgroup_dir_fd`, and reaps it. 0 when it worked, else the errno (ENOSYS:
/// no clone3, before 5.3 or filtered; E2BIG or EINVAL: no CLONE_INTO_CGROUP, before 5.7;
/// ENOSYS also where the trampoline is not built for this architecture; anything else:
/// this cgroup refused). The spawner asks once and keeps the answer. Same thread as
/// start_child().
int probe_clone_into_cgroup(int cgroup_dir_fd);

/// Reads which signals are not at their default disposition in this process (the child
/// resets those). start_child() does it on its first call; a caller that changes its
/// dispositions afterwards (a test) calls it again. Same thread as start_child().
void note_signals_to_reset();

}  // namespace spawnpool::detail
