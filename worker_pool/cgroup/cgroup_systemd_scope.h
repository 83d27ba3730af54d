// No root, with systemd (issue 17 item 4): where the driver may not write its own cgroup
// v2 (a terminal's session scope), the user's systemd manager can give it a delegated
// cgroup: a transient scope with Delegate=yes, started on the user bus with
// StartTransientUnit, that this process is moved into (what
// `systemd-run --user --scope -p Delegate=yes` does for the whole command). The pool then
// makes its slot cgroups inside it. libsystemd (sd-bus) is loaded at run time: where it
// or a user bus is absent, this says why and the pool goes on without slot cgroups.
// Not thread-safe against another call of itself; the bus connection lives only in it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace spawnpool::detail {

/// The one command that gives a build a delegated cgroup by hand, for warnings and docs.
inline constexpr const char* kDelegatedScopeCommand =
    "systemd-run --user --scope -p Delegate=yes <build command>";

/// What StartTransientUnit is asked: the unit's name and mode, and its properties.
struct DelegatedScopeRequest {
  std::string unit_name;       ///< spawnpool-<pid>-<random hex>.scope
  std::string mode = "fail";   ///< a unit of that name already there is an error
  std::string description;     ///< what `systemctl --user status` shows
  bool delegate = true;        ///< Delegate=yes: the subtree is the user's to write
  std::vector<std::uint32_t> pids;  ///< moved into the scope when it starts: this process
  /// Removed once its processes are gone, even if it failed (no unit left behind).
  std::string collect_mode = "inactive-or-failed";
};

/// The request for moving process `pid` into a new delegated scope; `random_bits` make
/// the name unique beyond the pid (pid namespaces share a user manager).
DelegatedScopeRequest delegated_scope_request(pid_t pid, std::uint64_t random_bits);

/// Sends `request` to the systemd manager on the user bus (sd_bus_open_user:
/// DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus), waits at most `timeout` for
/// its job to finish, and checks that this process is now in the scope
/// (/proc/self/cgroup). False with `why` when libsystemd is missing, no user bus
/// answers, systemd refuses or fails the unit, or this process did not move.
bool start_delegated_scope(const DelegatedScopeRequest& request,
                           std::chrono::milliseconds timeout, std::string& why);

/// Whether the unified-hierarchy line of `proc_self_cgroup` (the text of
/// /proc/self/cgroup) puts the process in the unit `unit_name` or below it.
bool cgroup_is_in_unit(const std::string& proc_self_cgroup, const std::string& unit_name);

}  // namespace spawnpool::detail
