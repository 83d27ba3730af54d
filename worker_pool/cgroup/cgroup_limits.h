// The driver's own memory limit and usage as its cgroups state them, for the `auto`
// memory budget (the smaller of limit minus usage and MemAvailable, minus a reserve),
// and where its memory pressure can be read. Reads cgroup files on each call (no
// state): thread-safe; a few system calls per cgroup level.
#pragma once

#include <cstdint>
#include <string>

#include "worker_pool/cgroup/cgroup_discovery.h"
#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::detail {

struct CgroupMemoryStatus {
  bool known = false;  ///< false: no memory cgroup could be read (use MemAvailable alone)
  /// The limit that leaves the least room, over the driver's cgroup and its ancestors
  /// (v1 memory.limit_in_bytes; v2 the smaller of memory.max and memory.high, since
  /// above memory.high the kernel throttles). kNoLimit when none is set.
  std::int64_t limit_bytes = kNoLimit;
  std::int64_t usage_bytes = 0;  ///< usage of that cgroup (the driver's own if no limit)
  /// Inactive file pages in that cgroup: page cache the kernel takes back first, so
  /// usage minus this is nearer the memory in use (what `docker stats` shows).
  std::int64_t reclaimable_bytes = 0;
  std::string limiting_dir;  ///< the cgroup whose figures these are
};

/// Reads the status of `hierarchy.dir` and its ancestors up to the hierarchy's root.
CgroupMemoryStatus read_cgroup_memory_status(const CgroupHierarchy& hierarchy);

/// The driver's memory.pressure (PSI of its v2 cgroup, also on a hybrid machine whose
/// unified hierarchy has no controllers), or "" where there is none or it is the root
/// cgroup's (the same numbers as /proc/pressure/memory, which the caller reads then).
/// A driver that moved itself into its v2 leaf (spawnpool-<pid>-driver) is measured
/// with its pools: the leaf's parent is named.
std::string memory_pressure_file(const CgroupHierarchy& hierarchy);

}  // namespace spawnpool::detail
