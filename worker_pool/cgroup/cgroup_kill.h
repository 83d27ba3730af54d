// Ending everything a command started through its slot's cgroup: also processes that
// left its process group or session (setsid, double fork), which a kill(-pgid) misses.
// Thread-safe and reentrant (each call reads into its own buffers): the spawner's watch
// thread (cancel, driver death) and the driver (close, spawner death) both use it.
#pragma once

#include <chrono>

#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {

/// Sends `sig` once to every process listed in the cgroup.procs of the cgroup open at
/// `dir_fd`. Each pid is pinned with a pidfd and then checked against a second read of
/// the list, so a pid recycled in between (by a process outside the cgroup) is never
/// signalled. Returns how many processes the first read listed (0 also when the cgroup
/// was removed meanwhile), or -1 with errno.
int signal_cgroup_processes(int dir_fd, int sig);

/// As signal_cgroup_processes(), for the cgroup at `dir_fd` and every cgroup below it (a
/// slot's command cgroups). Returns how many processes were listed in all (0 also when
/// the cgroup was removed meanwhile), or -1 with errno when the top one cannot be read.
int signal_cgroup_tree(int dir_fd, int sig);

/// SIGKILLs everything in the cgroup at `dir_fd` and below it, and waits until none of
/// it runs, for at most `timeout`. v2 with cgroup.kill (kernel 5.14+): one write, which
/// takes the cgroups below and processes forked meanwhile too, then a wait for
/// "populated 0" in cgroup.events. v1 (and older v2): SIGKILL to every listed process
/// (signal_cgroup_tree), again until none is listed (a killed process can no longer
/// fork, so this ends). True once empty.
bool kill_cgroup_processes(int dir_fd, CgroupVersion version, std::chrono::milliseconds timeout);

/// Removes the cgroup `name` inside the directory open at `parent_fd`, retrying EBUSY
/// (a process killed a moment ago may still be exiting) until `timeout`. True when it
/// is gone, also when it was never there; false with errno otherwise.
bool remove_cgroup_dir(int parent_fd, const char* name, std::chrono::milliseconds timeout);

}  // namespace spawnpool::detail
