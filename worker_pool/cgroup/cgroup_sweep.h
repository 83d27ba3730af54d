// Removing a pool's cgroups so that nothing is left behind: at close by the driver, and
// after the driver's death by its spawners (they see their lifeline reach EOF without
// the driver's goodbye). Every step tolerates another process doing the same at the same
// time, so all spawners may sweep at once and whoever comes last removes the pool's
// directory. Thread-safe; blocking (up to the timeouts given).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>

#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {

class SlotCgroup;

/// Kills what runs in every slot-* cgroup of `pool_dir` and below them (the command
/// cgroups), and in the directory itself, removes the command cgroups and the slots,
/// then the directory. True once `pool_dir` is gone; false while a
/// slot could not be emptied within `timeout` (per cgroup) or another process still
/// creates slots.
bool remove_pool_cgroups(const std::string& pool_dir, CgroupVersion version,
                         std::chrono::milliseconds timeout);

/// v2, once the driver's last pool is gone: puts home/ back as it was before the
/// driver moved itself into home/spawnpool-<driver_pid>-driver (SlotCgroupFlags):
/// "-memory" to home's subtree_control if the driver enabled it, every process of the
/// leaf back into home, the leaf removed. Does nothing while another pool of the driver
/// remains in home. True when nothing is left to restore; false with `why`.
bool restore_driver_home(const std::string& home, pid_t driver_pid, std::uint32_t flags,
                         std::string& why);

/// What a spawner does when its lifeline closes. Always: kill everything in its own
/// slot (as it killed its command's process group before). When `driver_died` (EOF
/// came without the driver's goodbye): also every other slot, the pool's directory and,
/// on v2, the driver's home. A spawner replaced or closed by a live driver must not
/// sweep: the slot directory outlives it for its replacement. Returns false with `why`
/// when something could not be removed.
bool clean_up_slot_cgroups(const SlotCgroup& slot, bool driver_died, std::string& why);

}  // namespace spawnpool::detail
