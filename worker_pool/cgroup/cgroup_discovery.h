// Where the driver's memory cgroup is: from /proc/self/cgroup (which cgroup, per
// hierarchy) and /proc/self/mountinfo (where each hierarchy is mounted, and from which
// root). Handles cgroup v1 (a "memory" hierarchy), v2 (the unified one) and hybrid
// machines (v1 memory, v2 mounted without controllers), cgroup namespaces and bind mounts
// of a subtree. Pure parsing plus one function that reads /proc: thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {

struct CgroupHierarchy {
  CgroupVersion version = CgroupVersion::kNone;  ///< of the hierarchy with "memory"
  std::string dir;     ///< the driver's memory cgroup, an absolute directory
  /// The driver's cgroup in the unified (v2) hierarchy, wherever it is mounted, even
  /// without controllers (hybrid): its memory.pressure is the driver's. "" if none.
  std::string v2_dir;
  std::string why_not;  ///< when version is kNone: why no memory cgroup was found
};

/// From the texts of /proc/self/cgroup and /proc/self/mountinfo, without touching the
/// file system: a v1 memory hierarchy wins over v2 (on hybrid machines the memory
/// controller can only be on v1); v2 is taken as a candidate, confirmed by
/// find_memory_hierarchy().
CgroupHierarchy parse_memory_hierarchy(std::string_view proc_cgroup, std::string_view mountinfo);

/// parse_memory_hierarchy() of this process, confirmed on the file system: the v1
/// directory holds memory.usage_in_bytes; the v2 directory lists "memory" in its
/// cgroup.controllers (the controller is usable there).
CgroupHierarchy find_memory_hierarchy();

/// Unescapes a mountinfo path field (\040 for a space, \011, \012, \134).
std::string unescape_mount_path(std::string_view field);

}  // namespace spawnpool::detail
