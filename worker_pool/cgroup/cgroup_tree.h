// A pool's cgroups, created at pool start and removed at close:
//   <driver's memory cgroup>/spawnpool-<pid>-<64 random bits>/slot-<n>[/cmd-<pid>-<k>]
// one per job slot. On v2 each command is born in a cgroup of its own below its slot's,
// which its spawner makes and removes (cgroup_slot.h); on v1 (and v2 before 5.7) it
// joins the slot's before exec (the spawner's child writes to slot-<n>/cgroup.procs).
// Either way the counters are the command's.
// On v2 the driver first leaves its own cgroup for a leaf beside the pools
// (cgroup_v2_home.h). Thread-safe: create() and close() may run in any thread, the
// other members are read-only or take no shared state.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {

/// The environment variable that turns cgroups off for every pool of the process
/// ("1"): peaks then come from ru_maxrss, as where no hierarchy is writable.
inline constexpr const char* kDisableCgroupsEnv = "SPAWNPOOL_DISABLE_CGROUPS";

/// Whether kDisableCgroupsEnv is "1" now.
bool cgroups_disabled_by_environment();

struct CgroupTreeOptions {
  /// Where the pool's cgroup goes; empty: the driver's memory cgroup (found from
  /// /proc/self). A directory given here must be a cgroup (v1 or v2) that may receive
  /// children with the memory controller (v2: no process of its own).
  std::string parent_dir;
  /// False: accept a hierarchy without the memory controller (v2 mounted without
  /// controllers): the slots then kill and place commands, but measure nothing.
  bool require_memory = true;
  /// How long killing one slot's processes or removing a cgroup may take at close.
  std::chrono::milliseconds removal_timeout{2000};
};

class CgroupTree {
 public:
  /// Creates the pool's directory and `slots` slot cgroups. Returns null with
  /// `why_not` (for the pool's one-line notice) when cgroups are off
  /// (SPAWNPOOL_DISABLE_CGROUPS=1), no memory hierarchy is found, or it is not writable
  /// (mkdir fails with EACCES/EROFS...): the pool then measures peaks with ru_maxrss.
  /// Nothing is left behind on failure.
  static std::unique_ptr<CgroupTree> create(const CgroupTreeOptions& options,
                                            std::uint32_t slots, std::string& why_not);
  ~CgroupTree();  ///< close()
  CgroupTree(const CgroupTree&) = delete;
  CgroupTree& operator=(const CgroupTree&) = delete;

  CgroupVersion version() const { return version_; }
  const std::string& pool_dir() const { return pool_dir_; }
  std::uint32_t slot_count() const { return slots_; }
  /// What spawner `slot` is told (encode_slot_cgroup() makes its argument of it).
  SlotCgroupConfig slot_config(std::uint32_t slot) const;

  /// SIGKILLs everything in `slot`'s cgroup and waits until it is empty: for a spawner
  /// that died (its command's leftovers outside the command's process group).
  bool kill_slot(std::uint32_t slot) const;
  /// What the pool's cgroup (all its slots) uses now, in bytes: one read of a file held
  /// open (v1 memory.usage_in_bytes, v2 memory.current); 0 when unknown.
  std::int64_t usage_bytes() const;

  /// Kills what is left in every slot, removes the slots and the pool's directory and,
  /// on v2, puts the driver back into its own cgroup once its last pool is gone. Call
  /// after the spawners have been reaped. Idempotent. False with `why` when something
  /// could not be removed (it is retried by a later call and by the destructor).
  bool close(std::string& why);

 private:
  CgroupTree() = default;
  bool make_slots(const CgroupTreeOptions& options, std::string& why);

  CgroupVersion version_ = CgroupVersion::kNone;
  std::string pool_dir_;
  std::uint32_t slots_ = 0;
  std::uint32_t flags_ = 0;  // SlotCgroupFlags: what the driver did to its v2 home
  std::chrono::milliseconds removal_timeout_{2000};
  int usage_fd_ = -1;  // the pool directory's usage file (-1: none); open until destruction
  bool closed_ = false;
};

}  // namespace spawnpool::detail
