#include "worker_pool/cgroup/cgroup_discovery.h"

#include <unistd.h>

#include <vector>

#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::detail {
namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t end = text.find(separator, at);
    parts.push_back(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) return parts;
    at = end + 1;
  }
}

struct Mount {
  std::string root;   // the hierarchy's directory shown at mount_point
  std::string point;
};

// The cgroup mounts of mountinfo: v1 hierarchies carrying `controller`, or (controller
// empty) the cgroup2 ones. Fields: id parent dev root point options [optional...] -
// fstype source super-options.
std::vector<Mount> cgroup_mounts(std::string_view mountinfo, std::string_view controller) {
  std::vector<Mount> mounts;
  for (std::string_view line : split(mountinfo, '\n')) {
    const std::vector<std::string_view> fields = split(line, ' ');
    if (fields.size() < 7) continue;
    std::size_t dash = 6;
    while (dash < fields.size() && fields[dash] != "-") ++dash;
    if (dash + 1 >= fields.size()) continue;
    const std::string_view type = fields[dash + 1];
    const std::string_view options = dash + 3 < fields.size() ? fields[dash + 3] : "";
    const bool wanted = controller.empty()
                            ? type == "cgroup2"
                            : type == "cgroup" && lists_controller(options, controller, ",");
    if (wanted) mounts.push_back({unescape_mount_path(fields[3]), unescape_mount_path(fields[4])});
  }
  return mounts;
}

// A cgroup path is visible through a mount when the mount's root is the path or one
// of its ancestors. Paths naming a cgroup above our namespace's root ("/..") are not.
std::string resolve(const std::vector<Mount>& mounts, const std::string& path) {
  if (path.empty() || path[0] != '/' || path.find("/..") != std::string::npos) return "";
  for (const Mount& mount : mounts) {
    const std::string& root = mount.root;
    std::string rest;
    if (root == "/")
      rest = path == "/" ? "" : path;
    else if (path == root)
      rest = "";
    else if (path.compare(0, root.size() + 1, root + "/") == 0)
      rest = path.substr(root.size());
    else
      continue;
    return mount.point + rest;
  }
  return "";
}

}  // namespace

std::string unescape_mount_path(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view digits = field.substr(i + 1, 3);
      if (digits.find_first_not_of("01234567") == std::string_view::npos) {
        out += static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 +
                                 (digits[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

CgroupHierarchy parse_memory_hierarchy(std::string_view proc_cgroup, std::string_view mountinfo) {
  CgroupHierarchy found;
  std::string v1_path, v2_path;
  bool v2_line = false;
  for (std::string_view line : split(proc_cgroup, '\n')) {
    // hierarchy-id:controllers:path; the path itself may hold colons.
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string_view::npos ? first : line.find(':', first + 1);
    if (second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (line.substr(0, first) == "0" && controllers.empty()) {
      v2_line = true;
      v2_path = path;
    } else if (lists_controller(controllers, "memory", ",")) {
      v1_path = path;
    }
  }
  if (v2_line) found.v2_dir = resolve(cgroup_mounts(mountinfo, ""), v2_path);
  if (!v1_path.empty()) {
    found.dir = resolve(cgroup_mounts(mountinfo, "memory"), v1_path);
    if (!found.dir.empty()) {
      found.version = CgroupVersion::kV1;
      return found;
    }
    found.why_not = "the memory cgroup " + v1_path + " is not visible in any mount";
    return found;
  }
  if (!found.v2_dir.empty()) {
    found.version = CgroupVersion::kV2;
    found.dir = found.v2_dir;
    return found;
  }
  found.why_not = v2_line ? "the cgroup2 hierarchy is not mounted where this process sees it"
                          : "no memory cgroup in /proc/self/cgroup";
  return found;
}

CgroupHierarchy find_memory_hierarchy() {
  std::string proc_cgroup, mountinfo;
  if (!read_file_text("/proc/self/cgroup", proc_cgroup) ||
      !read_file_text("/proc/self/mountinfo", mountinfo)) {
    CgroupHierarchy none;
    none.why_not = "cannot read /proc/self/cgroup or /proc/self/mountinfo";
    return none;
  }
  CgroupHierarchy found = parse_memory_hierarchy(proc_cgroup, mountinfo);
  if (found.version == CgroupVersion::kV1 &&
      access((found.dir + "/memory.usage_in_bytes").c_str(), F_OK) != 0) {
    found.why_not = found.dir + " has no memory.usage_in_bytes";
    found.version = CgroupVersion::kNone;
  }
  std::string controllers;
  if (found.version == CgroupVersion::kV2) {
    read_file_text(found.dir + "/cgroup.controllers", controllers);
    controllers = controllers.substr(0, controllers.find('\n'));
    if (!lists_controller(controllers, "memory")) {
      found.why_not = "the memory controller is not available in " + found.dir +
                      " (cgroup.controllers: '" + controllers + "')";
      found.version = CgroupVersion::kNone;
    }
  }
  return found;
}

}  // namespace spawnpool::detail
