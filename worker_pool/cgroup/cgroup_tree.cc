#include "worker_pool/cgroup/cgroup_tree.h"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "worker_pool/cgroup/cgroup_discovery.h"
#include "worker_pool/cgroup/cgroup_v2_home.h"
#include "worker_pool/cgroup/cgroup_files.h"
#include "worker_pool/cgroup/cgroup_kill.h"
#include "worker_pool/cgroup/cgroup_sweep.h"

namespace spawnpool::detail {
namespace {

// 64 random bits: another pool of this process (same pid) never picks the same name.
std::string random_suffix() {
  std::uint64_t bits = 0;
  if (getrandom(&bits, sizeof bits, 0) != sizeof bits)
    bits = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(&bits)) ^
           static_cast<std::uint64_t>(time(nullptr));
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(bits));
  return text;
}

std::string error_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// v2 hands a controller to a cgroup's children only through its subtree_control: an
// explicit parent without "memory" there would make slots that measure nothing, and
// the pool's own "+memory" write would fail with a misleading ENOENT.
bool gives_children_memory(const std::string& parent, CgroupVersion version, std::string& why) {
  if (version != CgroupVersion::kV2) return true;
  std::string subtree;
  if (!read_file_text(parent + "/cgroup.subtree_control", subtree)) {
    why = error_text("cannot read " + parent + "/cgroup.subtree_control");
    return false;
  }
  subtree = subtree.substr(0, subtree.find('\n'));
  if (lists_controller(subtree, "memory")) return true;
  why = "the memory controller is not enabled for the children of " + parent +
        " (its cgroup.subtree_control: '" + subtree + "'; write +memory to it)";
  return false;
}

// Where the pool goes, and its hierarchy: an explicit parent, or the driver's cgroup.
bool choose_parent(const CgroupTreeOptions& options, std::string& parent,
                   CgroupVersion& version, std::string& why) {
  if (!options.parent_dir.empty()) {
    parent = options.parent_dir;
    version = cgroup_version_of(parent);
    if (version == CgroupVersion::kNone) why = parent + " is not a cgroup directory";
    return version != CgroupVersion::kNone &&
           (!options.require_memory || gives_children_memory(parent, version, why));
  }
  const CgroupHierarchy found = find_memory_hierarchy();
  parent = found.dir;
  version = found.version;
  why = found.why_not;
  return version != CgroupVersion::kNone;
}

}  // namespace

bool cgroups_disabled_by_environment() {
  const char* value = std::getenv(kDisableCgroupsEnv);
  return value != nullptr && std::strcmp(value, "1") == 0;
}

std::unique_ptr<CgroupTree> CgroupTree::create(const CgroupTreeOptions& options,
                                               std::uint32_t slots, std::string& why_not) {
  if (cgroups_disabled_by_environment()) {
    why_not = std::string(kDisableCgroupsEnv) + "=1";
    return nullptr;
  }
  std::string parent;
  CgroupVersion version;
  if (!choose_parent(options, parent, version, why_not)) return nullptr;

  std::unique_ptr<CgroupTree> tree(new CgroupTree());
  tree->version_ = version;
  tree->slots_ = slots;
  tree->removal_timeout_ = options.removal_timeout;
  tree->closed_ = true;  // until the whole tree stands: nothing for the destructor to do
  std::lock_guard<std::mutex> lock(v2_home_mutex());
  // Only the driver's own cgroup holds the driver: an explicit parent is taken as is.
  if (version == CgroupVersion::kV2 && options.parent_dir.empty() && options.require_memory) {
    const std::string driver_dir = parent;
    if (!leave_v2_home(driver_dir, parent, tree->flags_, why_not)) return nullptr;
  }
  tree->pool_dir_ = parent + "/spawnpool-" + std::to_string(getpid()) + "-" + random_suffix();
  if (mkdir(tree->pool_dir_.c_str(), 0755) != 0) {
    why_not = error_text("cannot create " + tree->pool_dir_);
    std::string ignored;
    restore_driver_home(parent, getpid(), tree->flags_, ignored);
    return nullptr;
  }
  if (!tree->make_slots(options, why_not)) {
    std::string ignored;
    remove_pool_cgroups(tree->pool_dir_, version, options.removal_timeout);
    restore_driver_home(parent, getpid(), tree->flags_, ignored);
    return nullptr;
  }
  tree->usage_fd_ = open_at(AT_FDCWD,
                            (tree->pool_dir_ + (version == CgroupVersion::kV1
                                                    ? "/memory.usage_in_bytes"
                                                    : "/memory.current")).c_str(),
                            O_RDONLY);
  tree->closed_ = false;
  return tree;
}

bool CgroupTree::make_slots(const CgroupTreeOptions& options, std::string& why) {
  // v2 hands a controller to a cgroup's children only through its subtree_control.
  if (version_ == CgroupVersion::kV2 && options.require_memory &&
      !write_file_text(pool_dir_ + "/cgroup.subtree_control", "+memory")) {
    why = error_text("cannot enable memory in " + pool_dir_ + "/cgroup.subtree_control");
    return false;
  }
  for (std::uint32_t slot = 0; slot < slots_; ++slot) {
    const std::string dir = pool_dir_ + "/" + slot_dir_name(slot);
    if (mkdir(dir.c_str(), 0755) != 0) {
      why = error_text("cannot create " + dir);
      return false;
    }
  }
  // memory.current, not memory.peak: kernels before 5.19 (RHEL 9's 5.14, Ubuntu
  // 22.04's 5.15) have the controller without a peak file; their slots still place and
  // kill, and measure with ru_maxrss (SlotCgroup::measures_memory()).
  const char* probe =
      version_ == CgroupVersion::kV1 ? "memory.max_usage_in_bytes" : "memory.current";
  const std::string first = pool_dir_ + "/" + slot_dir_name(0) + "/" + probe;
  if (options.require_memory && slots_ > 0 && access(first.c_str(), F_OK) != 0) {
    why = error_text("the slot cgroups have no memory controller (" + first + ")");
    return false;
  }
  return true;
}

CgroupTree::~CgroupTree() {
  std::string ignored;
  close(ignored);
  // Only here: a submitter may still read it while close() runs on another thread.
  if (usage_fd_ >= 0) ::close(usage_fd_);
}

SlotCgroupConfig CgroupTree::slot_config(std::uint32_t slot) const {
  SlotCgroupConfig config;
  config.version = version_;
  config.slot = slot;
  config.flags = flags_;
  config.driver_pid = getpid();
  config.pool_dir = pool_dir_;
  return config;
}

bool CgroupTree::kill_slot(std::uint32_t slot) const {
  const std::string dir = pool_dir_ + "/" + slot_dir_name(slot);
  const int fd = open_at(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return errno == ENOENT;
  const bool empty = kill_cgroup_processes(fd, version_, removal_timeout_);
  ::close(fd);
  return empty;
}

std::int64_t CgroupTree::usage_bytes() const {
  std::int64_t usage = 0;
  return usage_fd_ >= 0 && read_int64(usage_fd_, usage) && usage > 0 ? usage : 0;
}

bool CgroupTree::close(std::string& why) {
  std::lock_guard<std::mutex> lock(v2_home_mutex());
  if (closed_) return true;
  if (!remove_pool_cgroups(pool_dir_, version_, removal_timeout_)) {
    why = error_text("cannot remove " + pool_dir_);
    return false;
  }
  const std::string home = pool_dir_.substr(0, pool_dir_.find_last_of('/'));
  if (!restore_driver_home(home, getpid(), flags_, why)) return false;
  closed_ = true;
  return true;
}

}  // namespace spawnpool::detail
