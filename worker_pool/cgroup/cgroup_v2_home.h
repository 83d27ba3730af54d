// cgroup v2's "no internal processes" rule, for a driver that runs in a delegated cgroup
// of its own (systemd-run --user --scope -p Delegate=yes ...): a cgroup that enables the
// memory controller for its children may hold no process itself, so the driver moves
// into a leaf beside its pools, home/spawnpool-<pid>-driver, and goes back when its last
// pool closes (restore_driver_home() in worker_pool/cgroup/cgroup_sweep.h, which the spawners
// also run after the driver's death). Serialized within the process: call only with
// v2_home_mutex() held, together with the pool directory's creation or removal.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

namespace spawnpool::detail {

/// Guards leaving and restoring home against this process's other pools.
std::mutex& v2_home_mutex();

/// Makes the driver's v2 cgroup (`driver_dir`, as /proc/self/cgroup names it) able to
/// give its children the memory controller, and sets `home` to where pools go. Nothing
/// to do when its cgroup.subtree_control has memory already; when `driver_dir` is this
/// process's leaf (an earlier pool moved it there), home is the leaf's parent. Else home
/// must offer memory (cgroup.controllers) and hold no process but this one, which moves
/// into the leaf before "+memory" is written. Sets `flags` (SlotCgroupFlags) to what
/// restore_driver_home() must undo. False with `why`, home untouched, when it cannot.
bool leave_v2_home(const std::string& driver_dir, std::string& home, std::uint32_t& flags,
                   std::string& why);

}  // namespace spawnpool::detail
