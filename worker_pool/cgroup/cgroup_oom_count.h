// The OOM kills a pool without slot cgroups can still count: those of the driver's own
// memory cgroup (v2 memory.events, v1 memory.oom_control: both `oom_kill`, both readable
// in a read-only tree, as in a container), or else the machine's (/proc/vmstat
// `oom_kill`). The engine reads the counter before and after a command; a rise with the
// command killed by SIGKILL is taken for an OOM kill. Thread-safe: the file is opened
// once, and each read is one pread at offset 0.
#pragma once

#include <cstdint>
#include <string>

#include "worker_pool/cgroup/cgroup_discovery.h"
#include "worker_pool/cgroup/unique_fd.h"

namespace spawnpool::detail {

/// Which file an OomKillCount reads.
enum class OomCountSource : int {
  kNone = 0,
  kCgroupV2 = 1,  ///< <cgroup>/memory.events: kills in that cgroup and below
  kCgroupV1 = 2,  ///< <cgroup>/memory.oom_control: kills of that cgroup's own processes
  kMachine = 3,   ///< /proc/vmstat: every OOM kill on the machine
};

/// Move-only: it owns the counter's file.
class OomKillCount {
 public:
  /// The counter of the cgroup `hierarchy` names (where the driver, its spawners and
  /// their commands are), else `vmstat_path`'s. A file that does not give the counter
  /// now (the v2 root cgroup has no memory.events) is passed over.
  bool open(const CgroupHierarchy& hierarchy, const char* vmstat_path = "/proc/vmstat");
  /// Reads `path` as a file of kind `source` (tests: fixture files). False when it
  /// cannot be opened or has no `oom_kill` line.
  bool open_file(const std::string& path, OomCountSource source);

  bool is_open() const { return fd_.is_open(); }
  OomCountSource source() const { return source_; }
  const std::string& path() const { return path_; }

  /// The count now; false (errno set) when unreadable.
  bool read(std::int64_t& count) const;

 private:
  UniqueFd fd_;
  OomCountSource source_ = OomCountSource::kNone;
  std::string path_;
};

}  // namespace spawnpool::detail
