#include "worker_pool/cgroup/cgroup_config.h"

#include <cerrno>
#include <cstdlib>
#include <limits>

namespace spawnpool::detail {
namespace {

// Reads one decimal field ending at the next ':' and moves `at` past that colon.
bool take_number(const std::string& text, std::size_t& at, unsigned long long max,
                 unsigned long long& value) {
  const std::size_t colon = text.find(':', at);
  if (colon == std::string::npos || colon == at || colon - at > 20) return false;
  const std::string field = text.substr(at, colon - at);
  for (char c : field)
    if (c < '0' || c > '9') return false;
  errno = 0;
  value = std::strtoull(field.c_str(), nullptr, 10);
  if (errno != 0 || value > max) return false;
  at = colon + 1;
  return true;
}

}  // namespace

std::string slot_dir_name(std::uint32_t slot) { return "slot-" + std::to_string(slot); }

std::string slot_dir(const SlotCgroupConfig& config) {
  return config.pool_dir + "/" + slot_dir_name(config.slot);
}

std::string encode_slot_cgroup(const SlotCgroupConfig& config) {
  return std::to_string(static_cast<int>(config.version)) + ":" +
         std::to_string(config.slot) + ":" + std::to_string(config.flags) + ":" +
         std::to_string(config.driver_pid) + ":" + config.pool_dir;
}

bool decode_slot_cgroup(const std::string& text, SlotCgroupConfig& config, std::string& why) {
  std::size_t at = 0;
  unsigned long long version, slot, flags, driver_pid;
  if (!take_number(text, at, 2, version) ||
      !take_number(text, at, std::numeric_limits<std::uint32_t>::max(), slot) ||
      !take_number(text, at, kKnownSlotCgroupFlags, flags) ||
      !take_number(text, at, std::numeric_limits<pid_t>::max(), driver_pid)) {
    why = "malformed cgroup argument '" + text + "'";
    return false;
  }
  const std::string dir = text.substr(at);
  if (version == 0 || dir.size() < 2 || dir[0] != '/' || dir.back() == '/' ||
      dir.find('\0') != std::string::npos) {
    why = "cgroup argument without a usable version or absolute directory: '" + text + "'";
    return false;
  }
  config.version = static_cast<CgroupVersion>(version);
  config.slot = static_cast<std::uint32_t>(slot);
  config.flags = static_cast<std::uint32_t>(flags);
  config.driver_pid = static_cast<pid_t>(driver_pid);
  config.pool_dir = dir;
  return true;
}

}  // namespace spawnpool::detail
