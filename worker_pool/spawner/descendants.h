// Kill-all without a cgroup: a spawner without a slot cgroup makes itself its
// descendants' subreaper (PR_SET_CHILD_SUBREAPER), so that what a command leaves behind
// (a double fork, a daemon after setsid) becomes the spawner's child when its parent
// exits, rather than init's. Cancel and close then reach every descendant of the
// spawner, found through /proc. What escapes: a process that a subreaper below us (a
// command that is one itself) inherits is still reached; one moved out by a process
// manager it asked (systemd-run, a D-Bus activation) is not. Thread-safe: no state; the
// /proc walk allocates, so never between clone and exec.
#pragma once

#include <sys/types.h>

#include <chrono>

namespace spawnpool::detail {

/// Makes this process the subreaper of its descendants (Linux 3.4+). False with errno.
bool become_subreaper();

/// Sends `sig` once to every live descendant of this process outside process group
/// `skip_group` (the command's, which kill(-group) reached already: each process gets
/// the signal once). Each is pinned with a pidfd and checked to be still the child of
/// the process it was found under, so a recycled pid is never hit. Returns how many
/// were signalled.
int signal_descendants(int sig, pid_t skip_group);

/// SIGKILLs every descendant and walks again until none is left alive (a process may
/// fork while the walk runs), at most `timeout`. Reaps the children this process
/// inherited, but not `command` (the running command, which its waiter reaps). True
/// once none is left.
bool kill_descendants(pid_t command, std::chrono::milliseconds timeout);

/// Reaps every exited child without waiting. Only while no command runs: it takes any
/// child, and a command's status is its waiter's.
void reap_exited_children();

}  // namespace spawnpool::detail
