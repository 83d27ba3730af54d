// Reading and writing cgroup interface files (memory.peak, cgroup.procs, ...): small
// values at offset 0 through descriptors opened once, whole files for the rarer reads.
// Thread-safe (no shared state; pread/pwrite never move a shared offset). Failures
// return false with errno set; nothing here throws or prints.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {

/// What read_int64() gives for "max" (a v2 limit that is not set).
inline constexpr std::int64_t kNoLimit = -1;

/// openat() with O_CLOEXEC, retried on EINTR. -1 with errno on failure.
int open_at(int dir_fd, const char* name, int flags);

/// One decimal value (or "max") from offset 0 of `fd`. No allocation: this runs for
/// every command.
bool read_int64(int fd, std::int64_t& value);

/// The value of the line "`key` N" in a flat keyed file such as memory.events or
/// memory.oom_control, read from offset 0 of `fd` (first 4 KiB). No allocation.
bool read_keyed_value(int fd, std::string_view key, std::int64_t& value);

/// As read_keyed_value(), from text already read.
bool find_keyed_value(std::string_view text, std::string_view key, std::int64_t& value);

/// Writes `text` at offset 0 in one write() (a cgroup file takes one value per write).
bool write_text(int fd, std::string_view text);

/// The whole file from offset 0 (cgroup.procs, memory.stat); `out` is replaced.
bool read_all(int fd, std::string& out);

/// Whether a controller list names `controller` as a whole word: by default the text of
/// cgroup.controllers or cgroup.subtree_control (names separated by spaces, a newline at
/// the end); with "," a v1 mount's options or a /proc/PID/cgroup line's controllers.
bool lists_controller(std::string_view list, std::string_view controller,
                      std::string_view separators = " \n");

/// Names of the subdirectories (child cgroups) of the directory open at `dir_fd` that
/// start with `prefix` ("" for all); none where it cannot be listed.
std::vector<std::string> subdirectories(int dir_fd, const std::string& prefix);

/// Opens `name` under `dir_fd` (AT_FDCWD: a path), runs `use(fd)` on it and closes it;
/// false when it cannot be opened, else what `use` returned, with errno as `use` left it.
template <typename Use>
bool with_file_at(int dir_fd, const char* name, int flags, Use&& use) {
  const int fd = open_at(dir_fd, name, flags);
  if (fd < 0) return false;
  const bool ok = use(fd);
  const int error = errno;
  ::close(fd);
  errno = error;
  return ok;
}

/// Path-based forms for set-up and tear-down, where one open per call does not matter.
bool read_file_text(const std::string& path, std::string& out);
bool write_file_text(const std::string& path, std::string_view text);

/// The pids listed one per line in a cgroup.procs text.
std::vector<pid_t> parse_pid_list(std::string_view text);

/// Which cgroup hierarchy `dir` lives in, from its file system's magic (kNone: neither).
CgroupVersion cgroup_version_of(const std::string& dir);

}  // namespace spawnpool::detail
