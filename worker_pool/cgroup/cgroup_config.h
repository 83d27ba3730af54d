// What a spawner is told about its slot's cgroup: the hierarchy version, the pool's
// cgroup directory and its slot, passed by the driver as one command-line argument.
// Pure functions over values: thread-safe. Both sides distrust the text (the spawner
// decodes what a driver of another build may have written).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace spawnpool::detail {

enum class CgroupVersion : int {
  kNone = 0,  // no cgroup: peaks from ru_maxrss, kills by process group
  kV1 = 1,    // the cgroup v1 memory hierarchy (memory.max_usage_in_bytes, oom_control)
  kV2 = 2,    // the unified hierarchy (memory.peak, memory.events, cgroup.kill)
};

/// Flags of SlotCgroupConfig.
enum SlotCgroupFlags : std::uint32_t {
  // v2: the driver moved itself out of its own cgroup ("home") into the leaf
  // home/spawnpool-<driver_pid>-driver, because a cgroup that enables a controller for
  // its children may hold no process itself. Whoever is last after the driver's death
  // moves the leaf's processes home and removes the leaf.
  kDriverLeftHome = 1u << 0,
  // v2: the driver wrote "+memory" to home/cgroup.subtree_control; undone on the way back.
  kEnabledMemoryAtHome = 1u << 1,
  kKnownSlotCgroupFlags = kDriverLeftHome | kEnabledMemoryAtHome,
};

struct SlotCgroupConfig {
  CgroupVersion version = CgroupVersion::kNone;
  std::uint32_t slot = 0;
  std::uint32_t flags = 0;   // SlotCgroupFlags
  pid_t driver_pid = 0;      // the driver: its death is told apart from a pool's close
  std::string pool_dir;      // absolute: <driver's cgroup>/spawnpool-<pid>-<random>
};

/// "slot-<n>": the name of slot n's cgroup inside the pool directory.
std::string slot_dir_name(std::uint32_t slot);

/// The pool's slot directory for `config.slot`.
std::string slot_dir(const SlotCgroupConfig& config);

/// The spawner's argument: "<version>:<slot>:<flags>:<driver pid>:<pool dir>" (the
/// directory last: it may hold colons).
std::string encode_slot_cgroup(const SlotCgroupConfig& config);

/// Parses encode_slot_cgroup()'s text. False with `why` when anything is off (unknown
/// version or flags, a relative or empty directory, a number out of range).
bool decode_slot_cgroup(const std::string& text, SlotCgroupConfig& config, std::string& why);

}  // namespace spawnpool::detail
