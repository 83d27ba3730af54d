// Waiting for a launched command in the spawner: drains its captured output the whole
// time (a full pipe must never block the child), notices its exit through a pidfd, and
// reaps it with its resource usage. Main thread of the spawner only.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <cstdint>
#include <string>

#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/spawner/command_launcher.h"
#include "worker_pool/protocol/monotonic_clock.h"
#include "worker_pool/spawner/running_child.h"

namespace spawnpool::detail {

/// What wait_for_command() learnt; it resets every field but the output first.
struct CommandOutcome {
  int wait_status = 0;         // as from wait4(); meaningless when reap_error != 0
  int reap_error = 0;          // errno of a wait4() that failed (the status is unknown), or 0
  struct rusage usage {};
  std::int64_t exited_ns = 0;  // CLOCK_MONOTONIC when reaped (or when the reap failed)
  std::string stdout_data;     // captured output; cleared by the caller between commands
  std::string stderr_data;
};

/// Waits for `command` to exit, collecting its output into `outcome`. Output a
/// background grandchild still writes after the command exited is read until the pipe
/// is momentarily empty, never waited for. Closes the command's pipe ends. `running` is
/// cleared just before the reap. False when the command could not be reaped (wait4 failed
/// other than with EINTR: `outcome.reap_error`); its status is then unknown, never a
/// previous command's. `sampler`, when set, has its command cgroup's memory.current
/// sampled while the command runs (SlotCgroup::sample_memory(), kernels without
/// memory.peak): at the start, then after 1, 2, 4, 8 ms and every 10 ms from there, so
/// that a short command costs a few reads and a long one 100 wake-ups a second.
bool wait_for_command(LaunchedCommand& command, RunningChild& running, CommandOutcome& outcome,
                      SlotCgroup* sampler = nullptr);

}  // namespace spawnpool::detail
