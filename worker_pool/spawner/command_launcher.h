// Starting one command from a spawner: PATH search in the command's own environment,
// then the child (child_start.h) set up as a build tool expects (own process group,
// default signals, stdin /dev/null, no inherited fds). Called from the spawner's main
// thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "worker_pool/protocol/cpu_affinity.h"
#include "worker_pool/protocol/protocol.h"
#include "worker_pool/protocol/request_codec.h"

namespace spawnpool::detail {

struct LaunchedCommand {
  pid_t pid = -1;       // -1 when the launch failed
  int stdout_fd = -1;   // read ends of the capture pipes, -1 when not captured
  int stderr_fd = -1;   // -1 also when stderr is merged into stdout
  FailureStage failure = FailureStage::kNone;
  int error_number = 0;
  std::int64_t launch_ns = 0;  // CLOCK_MONOTONIC just before the (last) clone; 0 if none
  bool joined_cgroup = false;  // the child joined (was born in) its cgroup before exec
  // With child_cpus: the kernel refused the command its set (and every CPU) from inside
  // and from outside: it may run on the CPU it started on. Its errno; 0 otherwise.
  int cpu_set_error = 0;
};

/// Does the launch's one-time set-up now (the commands' /dev/null, the child's stack, the
/// signals the child resets), so the first command costs what later ones do. Called by
/// the spawner before it attaches; launch_command() does it on first use otherwise.
void prepare_command_launch();

/// Starts `request`. `close_extra_fds`: ask the child to close every fd >= 3
/// (close_range); without it the spawner relies on keeping all its own fds close-on-exec.
/// `child_cpus`: the CPU set the command gets just before exec (null: the caller's), and
/// `every_cpu` (child_cpus->every_cpu(), made once by the caller) where it is refused.
/// `cgroup_procs_fd`: the slot cgroup's cgroup.procs the child joins (-1: none);
/// `cgroup_dir_fd`: instead, the command cgroup the child is born in (-1: none).
LaunchedCommand launch_command(const DecodedRequest& request, bool close_extra_fds,
                               const CpuSet* child_cpus, const CpuSet* every_cpu,
                               int cgroup_procs_fd, int cgroup_dir_fd = -1);

}  // namespace spawnpool::detail
