#include "worker_pool/cgroup/cgroup_limits.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace spawnpool::detail {
namespace {

// v1 reports "no limit" as the page counter's maximum (2^63 rounded down to a page).
constexpr std::int64_t kV1NoLimitFloor = std::int64_t{1} << 62;

std::string parent_of(const std::string& dir) {
  const std::size_t slash = dir.find_last_of('/');
  return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
}

bool read_value(const std::string& path, std::int64_t& value) {
  const int fd = open_at(AT_FDCWD, path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  const bool ok = read_int64(fd, value);
  close(fd);
  return ok;
}

// The v2 root cgroup has no memory.current (nor memory.max): it is the whole machine.
bool is_v2_root(const std::string& dir) {
  return dir == "/" || cgroup_version_of(parent_of(dir)) != CgroupVersion::kV2;
}

// What the root cgroup would show as memory.current: all memory not free (page cache
// included, as a cgroup's usage includes it), from /proc/meminfo (kB).
bool read_machine_usage(std::int64_t& usage) {
  std::string meminfo;
  if (!read_file_text("/proc/meminfo", meminfo)) return false;
  long long total_kb = -1, free_kb = -1;
  for (const char* line = meminfo.c_str(); line != nullptr && *line != '\0';) {
    std::sscanf(line, "MemTotal: %lld kB", &total_kb);
    std::sscanf(line, "MemFree: %lld kB", &free_kb);
    line = std::strchr(line, '\n');
    if (line != nullptr) ++line;
  }
  if (total_kb < 0 || free_kb < 0) return false;
  usage = static_cast<std::int64_t>(total_kb - free_kb) * 1024;
  return true;
}

struct Level {
  std::int64_t limit = kNoLimit;
  std::int64_t usage = 0;
};

bool read_level(const std::string& dir, CgroupVersion version, Level& level) {
  if (version == CgroupVersion::kV1) {
    if (!read_value(dir + "/memory.limit_in_bytes", level.limit) ||
        !read_value(dir + "/memory.usage_in_bytes", level.usage))
      return false;
    if (level.limit >= kV1NoLimitFloor) level.limit = kNoLimit;
    return true;
  }
  std::int64_t max = kNoLimit, high = kNoLimit;
  if (!read_value(dir + "/memory.current", level.usage))
    return is_v2_root(dir) && read_machine_usage(level.usage);
  read_value(dir + "/memory.max", max);  // absent at the root: no limit
  read_value(dir + "/memory.high", high);
  level.limit = max == kNoLimit ? high : high == kNoLimit ? max : std::min(max, high);
  return true;
}

std::int64_t reclaimable(const std::string& dir, CgroupVersion version) {
  std::string stat;
  std::int64_t value = 0;
  if (read_file_text(dir + "/memory.stat", stat))
    find_keyed_value(stat, version == CgroupVersion::kV1 ? "total_inactive_file" : "inactive_file",
                     value);
  return value;
}

// "spawnpool-<digits>-driver", the leaf a v2 driver moves itself into (cgroup_tree.h).
bool is_driver_leaf(const std::string& dir) {
  const std::string name = dir.substr(dir.find_last_of('/') + 1);
  const std::string prefix = "spawnpool-", suffix = "-driver";
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return false;
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  return digits.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

// Loop structure: from the driver's cgroup upwards, while the directory is still in the
// same cgroup file system; the level with the least headroom (limit minus usage) wins.
CgroupMemoryStatus read_cgroup_memory_status(const CgroupHierarchy& hierarchy) {
  CgroupMemoryStatus status;
  if (hierarchy.version == CgroupVersion::kNone) return status;
  std::int64_t best_room = 0;
  for (std::string dir = hierarchy.dir;; dir = parent_of(dir)) {
    if (cgroup_version_of(dir) != hierarchy.version) break;
    Level level;
    if (!read_level(dir, hierarchy.version, level)) break;
    const bool first = !status.known;
    const std::int64_t room = level.limit == kNoLimit ? -1 : level.limit - level.usage;
    if (first || (room >= 0 && (status.limit_bytes == kNoLimit || room < best_room))) {
      status.known = true;
      status.limit_bytes = level.limit;
      status.usage_bytes = level.usage;
      status.limiting_dir = dir;
      best_room = room;
    }
    if (dir == "/") break;
  }
  if (status.known) status.reclaimable_bytes = reclaimable(status.limiting_dir, hierarchy.version);
  return status;
}

std::string memory_pressure_file(const CgroupHierarchy& hierarchy) {
  if (hierarchy.v2_dir.empty()) return "";
  const std::string dir =
      is_driver_leaf(hierarchy.v2_dir) ? parent_of(hierarchy.v2_dir) : hierarchy.v2_dir;
  // The root cgroup's file repeats /proc/pressure/memory; its parent is not a cgroup.
  if (cgroup_version_of(parent_of(dir)) != CgroupVersion::kV2) return "";
  const std::string file = dir + "/memory.pressure";
  return access(file.c_str(), R_OK) == 0 ? file : "";
}

}  // namespace spawnpool::detail
