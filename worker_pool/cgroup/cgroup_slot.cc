#include "worker_pool/cgroup/cgroup_slot.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
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

}  // namespace

SlotCgroup::~SlotCgroup() {
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
  if (!open_memory_files(options)) {
    close_fd(peak_fd_);
    close_fd(current_fd_);
    close_fd(oom_fd_);
  }
  return true;
}

bool SlotCgroup::open_memory_files(const SlotCgroupOpenOptions& options) {
  if (config_.version == CgroupVersion::kV1) {
    peak_fd_ = open_at(dir_fd_, "memory.max_usage_in_bytes", O_RDWR);
    oom_fd_ = open_at(dir_fd_, "memory.oom_control", O_RDONLY);
    peak_resets_ = true;
    return peak_fd_ >= 0 && oom_fd_ >= 0;
  }
  peak_fd_ = options.allow_peak_reset ? open_resettable_peak(dir_fd_) : -1;
  peak_resets_ = peak_fd_ >= 0;
  if (!peak_resets_) {
    peak_fd_ = open_at(dir_fd_, "memory.peak", O_RDONLY);
    current_fd_ = open_at(dir_fd_, "memory.current", O_RDONLY);
  }
  oom_fd_ = open_at(dir_fd_, "memory.events", O_RDONLY);
  return peak_fd_ >= 0 && oom_fd_ >= 0 && (peak_resets_ || current_fd_ >= 0);
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
  if (!measures_memory()) return;
  if (peak_resets_) {
    begun_ = write_text(peak_fd_, "0") && read_peak(baseline_);
  } else {
    begun_ = read_peak(peak_before_) && read_int64(current_fd_, baseline_);
  }
  begun_ = begun_ && read_oom_kills(oom_kills_before_);
}

CommandMemory SlotCgroup::end_command(bool joined) {
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
  return dir_fd_ >= 0 ? signal_cgroup_processes(dir_fd_, sig) : 0;
}

std::int64_t reported_peak_bytes(const CommandMemory& memory, long max_rss_kb,
                                 bool& from_cgroup) {
  const std::int64_t rss = static_cast<std::int64_t>(max_rss_kb) * 1024;
  from_cgroup = memory.measured;
  return memory.measured ? std::max(memory.peak_bytes, rss) : rss;
}

}  // namespace spawnpool::detail
