// Joining the slot's cgroup from a command's child process, between clone and exec.
// The spawner opens the slot's cgroup.procs once (SlotCgroup::procs_fd()); the child
// writes "0" (the writer itself) to it: one raw system call, async-signal-safe, no
// allocation, no sanitizer instrumentation, so it fits child_start.cc's child code.
#pragma once

namespace spawnpool::detail {

/// Moves the calling process into the cgroup whose cgroup.procs is open for writing at
/// `procs_fd`. Returns 0, or the errno value of the failed write (the child then runs
/// outside the slot's cgroup: its peak comes from ru_maxrss, see SlotCgroup).
int join_cgroup_from_child(int procs_fd);

}  // namespace spawnpool::detail
