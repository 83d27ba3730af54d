#include "worker_pool/cgroup/cgroup_sweep.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "worker_pool/cgroup/cgroup_files.h"
#include "worker_pool/cgroup/cgroup_kill.h"
#include "worker_pool/cgroup/cgroup_slot.h"

namespace spawnpool::detail {
namespace {

constexpr std::chrono::milliseconds kSweepTimeout{2000};

// Kills what runs in `name` inside `parent_fd` and below it, then removes its command
// cgroups (a slot's cmd-*, cgroup_slot.h) and itself: a cgroup with children is busy.
bool empty_and_remove(int parent_fd, const std::string& name, CgroupVersion version,
                      std::chrono::milliseconds timeout) {
  const int fd = open_at(parent_fd, name.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return errno == ENOENT;  // another sweeper was quicker
  kill_cgroup_processes(fd, version, timeout);
  for (const std::string& child : subdirectories(fd, ""))
    remove_cgroup_dir(fd, child.c_str(), timeout);
  close(fd);
  return remove_cgroup_dir(parent_fd, name.c_str(), timeout);
}

std::string parent_of(const std::string& dir) { return dir.substr(0, dir.find_last_of('/')); }
std::string name_of(const std::string& dir) { return dir.substr(dir.find_last_of('/') + 1); }

// Moves every process listed in `from`/cgroup.procs into `to`/cgroup.procs.
bool move_processes(const std::string& from, const std::string& to, std::string& why) {
  std::string listed;
  if (!read_file_text(from + "/cgroup.procs", listed)) return errno == ENOENT;
  for (pid_t pid : parse_pid_list(listed)) {
    if (!write_file_text(to + "/cgroup.procs", std::to_string(pid)) && errno != ESRCH) {
      why = "cannot move process " + std::to_string(pid) + " back to " + to + ": " +
            std::strerror(errno);
      return false;
    }
  }
  return true;
}

}  // namespace

bool remove_pool_cgroups(const std::string& pool_dir, CgroupVersion version,
                         std::chrono::milliseconds timeout) {
  const int pool_fd = open_at(AT_FDCWD, pool_dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (pool_fd < 0) return errno == ENOENT;
  for (const std::string& slot : subdirectories(pool_fd, "slot-"))
    empty_and_remove(pool_fd, slot, version, timeout);
  // Nothing should run in the pool's own directory; were anything there, it would keep
  // the directory alive.
  kill_cgroup_processes(pool_fd, version, timeout);
  close(pool_fd);
  const int parent_fd = open_at(AT_FDCWD, parent_of(pool_dir).c_str(), O_RDONLY | O_DIRECTORY);
  if (parent_fd < 0) return errno == ENOENT;
  const bool removed = remove_cgroup_dir(parent_fd, name_of(pool_dir).c_str(), timeout);
  close(parent_fd);
  return removed;
}

// The order matters: a v2 cgroup that enables a controller for its children may hold no
// process, so memory goes off at home before the processes come back; only then is the
// leaf empty and removable.
bool restore_driver_home(const std::string& home, pid_t driver_pid, std::uint32_t flags,
                         std::string& why) {
  if (!(flags & kDriverLeftHome)) return true;
  const int home_fd = open_at(AT_FDCWD, home.c_str(), O_RDONLY | O_DIRECTORY);
  if (home_fd < 0) return errno == ENOENT;
  const std::string prefix = "spawnpool-" + std::to_string(driver_pid) + "-";
  const std::string leaf_name = prefix + "driver";
  bool other_pools = false;
  for (const std::string& name : subdirectories(home_fd, prefix))
    other_pools = other_pools || name != leaf_name;
  close(home_fd);
  if (other_pools) return true;  // the last of them restores
  if ((flags & kEnabledMemoryAtHome) &&
      !write_file_text(home + "/cgroup.subtree_control", "-memory")) {
    why = "cannot disable memory in " + home + "/cgroup.subtree_control: " +
          std::strerror(errno);
    return false;
  }
  const std::string leaf = home + "/" + leaf_name;
  if (!move_processes(leaf, home, why)) return false;
  const int again_fd = open_at(AT_FDCWD, home.c_str(), O_RDONLY | O_DIRECTORY);
  const bool removed = again_fd >= 0 && remove_cgroup_dir(again_fd, leaf_name.c_str(),
                                                          kSweepTimeout);
  if (!removed) why = "cannot remove " + leaf + ": " + std::strerror(errno);
  if (again_fd >= 0) close(again_fd);
  return removed;
}

bool clean_up_slot_cgroups(const SlotCgroup& slot, bool driver_died, std::string& why) {
  if (!slot.is_open()) return true;
  bool clean = slot.kill_all(kSweepTimeout);
  if (!clean) why = "processes of slot " + slot_dir(slot.config()) + " survived SIGKILL";
  if (!driver_died) return clean;
  const SlotCgroupConfig& config = slot.config();
  if (!remove_pool_cgroups(config.pool_dir, config.version, kSweepTimeout)) {
    // Another spawner may still be emptying its slot; it removes the pool when done.
    return false;
  }
  if (config.version == CgroupVersion::kV2)
    clean = restore_driver_home(parent_of(config.pool_dir), config.driver_pid, config.flags,
                                why) && clean;
  return clean;
}

}  // namespace spawnpool::detail
