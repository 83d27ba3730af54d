#include "worker_pool/cgroup/cgroup_oom_count.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::detail {

bool OomKillCount::open(const CgroupHierarchy& hierarchy, const char* vmstat_path) {
  if (hierarchy.version == CgroupVersion::kV2 &&
      open_file(hierarchy.dir + "/memory.events", OomCountSource::kCgroupV2))
    return true;
  if (hierarchy.version == CgroupVersion::kV1 &&
      open_file(hierarchy.dir + "/memory.oom_control", OomCountSource::kCgroupV1))
    return true;
  return open_file(vmstat_path, OomCountSource::kMachine);
}

bool OomKillCount::open_file(const std::string& path, OomCountSource source) {
  const int fd = open_at(AT_FDCWD, path.c_str(), O_RDONLY);
  if (fd < 0) return false;
  fd_.reset(fd);
  source_ = source;
  path_ = path;
  std::int64_t count = 0;
  if (read(count)) return true;
  const int error = errno;
  fd_.reset();
  source_ = OomCountSource::kNone;
  path_.clear();
  errno = error;
  return false;
}

// The cgroup files are a few lines; /proc/vmstat is about 4 KiB and grows with the
// kernel's counters, so it is read whole.
bool OomKillCount::read(std::int64_t& count) const {
  if (!fd_.is_open()) {
    errno = EBADF;
    return false;
  }
  if (source_ != OomCountSource::kMachine) return read_keyed_value(fd_.get(), "oom_kill", count);
  std::string text;
  if (!read_all(fd_.get(), text)) return false;
  if (find_keyed_value(text, "oom_kill", count)) return true;
  errno = EPROTO;
  return false;
}

}  // namespace spawnpool::detail
