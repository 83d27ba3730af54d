#include "worker_pool/cgroup/cgroup_slot.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "worker_pool/cgroup/cgroup_files.h"
#include "worker_pool/cgroup/cgroup_kill.h"

namespace spawnpool::detail {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

// v2 (kernel 6.12+): a write to memory.peak sets that open file's peak to the current
// usage; later reads through the same file give the peak since. Older kernels refuse
// the open for writing (EACCES), or the write.
int open_resettable_peak(int dir_fd) {
  const int fd = open_at(dir_fd, "memory.peak", O_RDWR);
  if (fd < 0) return -1;
  if (write_text(fd, "0")) return fd;
  close(fd);
  return -1;
}

// Whether the controller list in `file` ("cgroup.controllers", "cgroup.subtree_control":
// one line of space-separated names) names memory.
bool lists_memory(int dir_fd, const char* file) {
  std::string text;
  return with_file_at(dir_fd, file, O_RDONLY, [&](int fd) { return read_all(fd, text); }) &&
         lists_controller(text, "memory");
}

// Writes `change` ("+memory", "-memory") to the cgroup's cgroup.subtree_control; false
// with errno set when it cannot.
bool change_subtree_control(int dir_fd, const char* change) {
  return with_file_at(dir_fd, "cgroup.subtree_control", O_WRONLY,
                      [&](int fd) { return write_text(fd, change); });
}

bool exists_at(int dir_fd, const char* name) {
  struct stat st;
  return fstatat(dir_fd, name, &st, 0) == 0;
}

}  // namespace

SlotCgroup::~SlotCgroup() {
  close_command_files();
  close_fd(procs_fd_);
  close_fd(peak_fd_);
  close_fd(current_fd_);
  close_fd(oom_fd_);
  close_fd(dir_fd_);
}

bool SlotCgroup::open(const SlotCgroupConfig& config, std::string& why,
                      const SlotCgroupOpenOptions& options) {
  config_ = config;
  const std::string dir = slot_dir(config);
  if (options.require_cgroupfs && cgroup_version_of(dir) != config.version) {
    why = dir + " is not a cgroup of the announced version";
    return false;
  }
  dir_fd_ = open_at(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dir_fd_ >= 0) procs_fd_ = open_at(dir_fd_, "cgroup.procs", O_WRONLY);
  if (procs_fd_ < 0) {
    why = "cannot open " + dir + "/cgroup.procs: " + std::strerror(errno);
    close_fd(dir_fd_);
    return false;
  }
  options_ = options;
  if (config.version == CgroupVersion::kV2 && options.per_command &&
      start_per_command(options))
    return true;
  open_memory_files(options);
  return true;
}

// The slot gives its command cgroups the memory controller where it has it (a v2 tree
// without controllers still places and kills). A slot cgroup that enables a controller
// for its children may hold no process itself (the kernel refuses the write while it
// does: EBUSY), so a slot that still holds some stays in the slot mode.
bool SlotCgroup::start_per_command(const SlotCgroupOpenOptions& options) {
  remove_empty_command_cgroups();  // a dead predecessor's
  command_memory_ = lists_memory(dir_fd_, "cgroup.controllers");
  if (command_memory_ && !lists_memory(dir_fd_, "cgroup.subtree_control") &&
      !change_subtree_control(dir_fd_, "+memory"))
    return false;
  // The slot's own memory.peak tells whether the kernel has the file (5.19+).
  has_peak_file_ = options.use_peak_file && exists_at(dir_fd_, "memory.peak");
  per_command_ = true;
  return true;
}

bool SlotCgroup::use_slot_cgroup(std::string& why) {
  if (!per_command_) return true;
  per_command_ = false;
  close_command_files();
  remove_empty_command_cgroups();
  // Also where a predecessor on this slot enabled it.
  if (lists_memory(dir_fd_, "cgroup.subtree_control") &&
      !change_subtree_control(dir_fd_, "-memory")) {
    why = "cannot disable memory in " + slot_dir(config_) +
          "/cgroup.subtree_control: " + std::strerror(errno);
    return false;
  }
  open_memory_files(options_);
  return true;
}

// Every child cgroup of the slot that is empty: a dead predecessor's, or an earlier
// command's whose leftovers have ended. Busy ones stay (their names are skipped).
void SlotCgroup::remove_empty_command_cgroups() {
  leftovers_.clear();
  const int listing_fd = open_at(dir_fd_, ".", O_RDONLY | O_DIRECTORY);
  DIR* dir = listing_fd >= 0 ? fdopendir(listing_fd) : nullptr;
  if (dir == nullptr) {
    if (listing_fd >= 0) close(listing_fd);
    return;
  }
  while (dirent* entry = readdir(dir)) {
    if (entry->d_type != DT_DIR || std::strcmp(entry->d_name, ".") == 0 ||
        std::strcmp(entry->d_name, "..") == 0)
      continue;
    if (unlinkat(dir_fd_, entry->d_name, AT_REMOVEDIR) != 0 && errno == EBUSY)
      leftovers_.push_back(entry->d_name);
  }
  closedir(dir);
}

void SlotCgroup::close_command_files() {
  close_fd(command_peak_fd_);
  close_fd(command_events_fd_);
  close_fd(command_fd_);
}

// mkdir names a fresh cgroup: cmd-<spawner pid>-<count>, skipping names that exist (a
// predecessor's cgroup with leftovers in it). On failure (the tree's limits, say
// cgroup.max.descendants) the command runs outside the pool's cgroups, unmeasured.
void SlotCgroup::make_command_cgroup() {
  static const long pid = static_cast<long>(getpid());
  bool made = false;
  for (int attempt = 0; attempt < 16 && !made; ++attempt) {
    std::snprintf(command_name_, sizeof command_name_, "cmd-%ld-%llu", pid,
                  static_cast<unsigned long long>(command_count_++));
    made = mkdirat(dir_fd_, command_name_, 0755) == 0;
    if (!made && errno != EEXIST) return;
  }
  if (!made) return;
  command_fd_ = open_at(dir_fd_, command_name_, O_RDONLY | O_DIRECTORY);
  if (command_fd_ < 0) {
    unlinkat(dir_fd_, command_name_, AT_REMOVEDIR);
    return;
  }
  if (!command_memory_) return;
  command_peak_fd_ = open_at(command_fd_, has_peak_file_ ? "memory.peak" : "memory.current",
                             O_RDONLY);
  command_events_fd_ = open_at(command_fd_, "memory.events", O_RDONLY);
}

// All of the slot's memory files or none (a slot without the memory controller still
// places and kills its commands; they are then measured by ru_maxrss).
void SlotCgroup::open_memory_files(const SlotCgroupOpenOptions& options) {
  bool all;
  if (config_.version == CgroupVersion::kV1) {
    peak_fd_ = open_at(dir_fd_, "memory.max_usage_in_bytes", O_RDWR);
    oom_fd_ = open_at(dir_fd_, "memory.oom_control", O_RDONLY);
    peak_resets_ = true;
    all = peak_fd_ >= 0 && oom_fd_ >= 0;
  } else {
    peak_fd_ = options.allow_peak_reset ? open_resettable_peak(dir_fd_) : -1;
    peak_resets_ = peak_fd_ >= 0;
    if (!peak_resets_) {
      peak_fd_ = open_at(dir_fd_, "memory.peak", O_RDONLY);
      current_fd_ = open_at(dir_fd_, "memory.current", O_RDONLY);
    }
    oom_fd_ = open_at(dir_fd_, "memory.events", O_RDONLY);
    all = peak_fd_ >= 0 && oom_fd_ >= 0 && (peak_resets_ || current_fd_ >= 0);
  }
  if (all) return;
  close_fd(peak_fd_);
  close_fd(current_fd_);
  close_fd(oom_fd_);
}

bool SlotCgroup::read_peak(std::int64_t& bytes) const { return read_int64(peak_fd_, bytes); }

bool SlotCgroup::read_oom_kills(std::int64_t& count) const {
  return read_keyed_value(oom_fd_, "oom_kill", count);
}

// v1: writing to memory.max_usage_in_bytes sets it to the current usage, which a read
// right after gives back as the baseline. v2 with reset: the same through memory.peak.
// v2 without: the lifetime peak so far, and memory.current as the baseline.
void SlotCgroup::begin_command() {
  begun_ = false;
  if (per_command_) {
    close_command_files();  // an end_command() that never came
    // Earlier commands' cgroups whose leftovers ended meanwhile: one rmdir each.
    for (std::size_t i = 0; i < leftovers_.size();) {
      if (unlinkat(dir_fd_, leftovers_[i].c_str(), AT_REMOVEDIR) == 0 || errno != EBUSY) {
        leftovers_[i] = std::move(leftovers_.back());
        leftovers_.pop_back();
      } else {
        ++i;
      }
    }
    make_command_cgroup();
    sampled_peak_ = 0;
    begun_ = command_fd_ >= 0;
    return;
  }
  if (!measures_memory()) return;
  if (peak_resets_) {
    begun_ = write_text(peak_fd_, "0") && read_peak(baseline_);
  } else {
    begun_ = read_peak(peak_before_) && read_int64(current_fd_, baseline_);
  }
  begun_ = begun_ && read_oom_kills(oom_kills_before_);
}

void SlotCgroup::sample_memory() {
  std::int64_t current = 0;
  if (samples_memory() && command_peak_fd_ >= 0 && read_int64(command_peak_fd_, current)) {
    sampled_peak_ = std::max(sampled_peak_, current);
  }
}

// A fresh cgroup's memory.peak is the command's own. Sampled, the last sample is taken
// now: what the command left charged (its page cache) was all charged at once, so it
// never exceeds the true peak.
CommandMemory SlotCgroup::end_own_command(bool joined) {
  CommandMemory memory;
  std::int64_t peak = 0, oom_kills = 0;
  if (joined && command_memory_ && command_peak_fd_ >= 0 && command_events_fd_ >= 0 &&
      read_int64(command_peak_fd_, peak) &&
      read_keyed_value(command_events_fd_, "oom_kill", oom_kills)) {
    memory.measured = true;
    memory.sampled = !has_peak_file_;
    memory.peak_bytes = memory.sampled ? std::max(sampled_peak_, peak) : peak;
    memory.oom_killed = oom_kills > 0;
  }
  close_command_files();
  // Empty once the command's tree is gone; processes it left behind keep it (and their
  // memory charged to the slot) until they end.
  if (unlinkat(dir_fd_, command_name_, AT_REMOVEDIR) != 0 && errno == EBUSY)
    leftovers_.emplace_back(command_name_);
  return memory;
}

CommandMemory SlotCgroup::end_command(bool joined) {
  if (per_command_) {
    if (!begun_) return {};
    begun_ = false;
    return end_own_command(joined);
  }
  CommandMemory memory;
  if (!begun_ || !joined) return memory;
  begun_ = false;
  std::int64_t peak = 0, oom_kills = 0;
  if (!read_peak(peak) || !read_oom_kills(oom_kills)) return memory;
  memory.oom_killed = oom_kills > oom_kills_before_;
  memory.baseline_bytes = baseline_;
  // Without a reset, only a peak this command raised is its own; below the old one,
  // the cgroup cannot tell how high the command went.
  memory.measured = peak_resets_ || peak > peak_before_;
  if (memory.measured) memory.peak_bytes = std::max<std::int64_t>(0, peak - baseline_);
  return memory;
}

bool SlotCgroup::kill_all(std::chrono::milliseconds timeout) const {
  return dir_fd_ >= 0 && kill_cgroup_processes(dir_fd_, config_.version, timeout);
}

int SlotCgroup::signal_all(int sig) const {
  return dir_fd_ >= 0 ? signal_cgroup_tree(dir_fd_, sig) : 0;
}

std::int64_t reported_peak_bytes(const CommandMemory& memory, long max_rss_kb,
                                 bool& from_cgroup) {
  const std::int64_t rss = static_cast<std::int64_t>(max_rss_kb) * 1024;
  from_cgroup = memory.measured;
  return memory.measured ? std::max(memory.peak_bytes, rss) : rss;
}

}  // namespace spawnpool::detail
