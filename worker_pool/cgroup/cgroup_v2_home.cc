#include "worker_pool/cgroup/cgroup_v2_home.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "worker_pool/cgroup/cgroup_config.h"
#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::detail {
namespace {

std::string leaf_name() { return "spawnpool-" + std::to_string(getpid()) + "-driver"; }

std::string error_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// What this process did to its home, for the pools that follow while it stays away.
std::uint32_t g_home_flags = 0;  // guarded by v2_home_mutex()

bool is_own_driver_leaf(const std::string& dir) {
  const std::string tail = "/" + leaf_name();
  return dir.size() > tail.size() && dir.compare(dir.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

std::mutex& v2_home_mutex() {
  static std::mutex mutex;
  return mutex;
}

bool leave_v2_home(const std::string& driver_dir, std::string& home, std::uint32_t& flags,
                   std::string& why) {
  if (is_own_driver_leaf(driver_dir)) {
    home = driver_dir.substr(0, driver_dir.find_last_of('/'));
    flags = g_home_flags | kDriverLeftHome;
    return true;
  }
  home = driver_dir;
  flags = 0;
  std::string subtree, controllers, procs;
  if (!read_file_text(home + "/cgroup.subtree_control", subtree) ||
      !read_file_text(home + "/cgroup.controllers", controllers) ||
      !read_file_text(home + "/cgroup.procs", procs)) {
    why = error_text("cannot read the cgroup files of " + home);
    return false;
  }
  if (lists_controller(subtree, "memory")) return true;
  if (!lists_controller(controllers, "memory")) {
    why = "the memory controller is not delegated to " + home;
    return false;
  }
  for (pid_t pid : parse_pid_list(procs)) {
    if (pid == getpid()) continue;
    why = home + " holds other processes (" + std::to_string(pid) +
          "...): cgroup v2 lets a cgroup with processes give no controller to its children;"
          " start the driver in a cgroup of its own (systemd-run --user --scope -p "
          "Delegate=yes ...)";
    return false;
  }
  const std::string leaf = home + "/" + leaf_name();
  if ((mkdir(leaf.c_str(), 0755) != 0 && errno != EEXIST) ||
      !write_file_text(leaf + "/cgroup.procs", std::to_string(getpid()))) {
    why = error_text("cannot move the driver into " + leaf);
    rmdir(leaf.c_str());
    return false;
  }
  if (!write_file_text(home + "/cgroup.subtree_control", "+memory")) {
    why = error_text("cannot enable memory in " + home + "/cgroup.subtree_control");
    write_file_text(home + "/cgroup.procs", std::to_string(getpid()));
    rmdir(leaf.c_str());
    return false;
  }
  g_home_flags = flags = kDriverLeftHome | kEnabledMemoryAtHome;
  return true;
}

}  // namespace spawnpool::detail
