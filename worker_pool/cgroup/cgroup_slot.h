// A spawner's view of its slot's cgroup: the files it opens once (cgroup.procs for the
// child to join, the peak and OOM counters), the per-command peak reset and reading, and
// killing everything in the slot. Threading: open(), begin_command() and end_command()
// on the spawner's main thread; kill_all() and signal_all() from any thread (the watch
// thread), also while a command runs; they touch only descriptors fixed by open().
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {

/// One command's memory as its slot's cgroup saw it.
struct CommandMemory {
  bool measured = false;  ///< false: the cgroup gave no peak for it (use ru_maxrss)
  /// The slot's highest usage while the command ran minus baseline_bytes: what the
  /// command added. Earlier commands' page cache (object files they wrote) and leftover
  /// processes stay charged to the slot; subtracting them keeps a small command small.
  std::int64_t peak_bytes = 0;
  std::int64_t baseline_bytes = 0;  ///< the slot's usage when the command started
  bool oom_killed = false;  ///< the OOM killer killed a process of the slot meanwhile
};

/// Options for tests: the production defaults are right everywhere else.
struct SlotCgroupOpenOptions {
  bool allow_peak_reset = true;  ///< false: behave as on a kernel without memory.peak reset
  bool require_cgroupfs = true;  ///< false: accept a plain directory of fake files
};

class SlotCgroup {
 public:
  SlotCgroup() = default;
  ~SlotCgroup();
  SlotCgroup(const SlotCgroup&) = delete;
  SlotCgroup& operator=(const SlotCgroup&) = delete;

  /// Opens slot `config.slot` of `config.pool_dir`. False with `why` when the slot is
  /// unusable; the spawner then runs its commands without a cgroup. A slot without the
  /// memory files (a v2 tree without the memory controller) opens, but measures nothing.
  bool open(const SlotCgroupConfig& config, std::string& why,
            const SlotCgroupOpenOptions& options = {});
  bool is_open() const { return dir_fd_ >= 0; }
  bool measures_memory() const { return peak_fd_ >= 0 && oom_fd_ >= 0; }
  /// v1 always; v2 from kernel 6.12 (memory.peak takes a write, per open file).
  bool peak_resets() const { return peak_resets_; }
  const SlotCgroupConfig& config() const { return config_; }

  /// The slot's cgroup.procs, open for writing (close-on-exec): the child passes it to
  /// join_cgroup_from_child() before exec. -1 when not open.
  int procs_fd() const { return procs_fd_; }

  /// Just before a launch: resets the slot's peak to its current usage (the baseline)
  /// and notes the OOM kill counter. Three system calls, no allocation.
  void begin_command();
  /// After the command was reaped: its peak above the baseline and whether the OOM
  /// killer struck (two reads). `joined`: whether the child joined
  /// (join_cgroup_from_child gave 0); a child that did not is not measured.
  CommandMemory end_command(bool joined);

  /// SIGKILLs every process in the slot (the command, its process group, whatever left
  /// it) and waits until none is left, at most `timeout`. True once empty; false also
  /// when not open (the caller then ends the command's process group as before).
  bool kill_all(std::chrono::milliseconds timeout) const;
  /// Sends `sig` once to every process in the slot; returns how many were listed.
  int signal_all(int sig) const;

 private:
  bool open_memory_files(const SlotCgroupOpenOptions& options);
  bool read_peak(std::int64_t& bytes) const;
  bool read_oom_kills(std::int64_t& count) const;

  SlotCgroupConfig config_;
  int dir_fd_ = -1;      // the slot's directory
  int procs_fd_ = -1;    // its cgroup.procs, write-only, for the child
  int peak_fd_ = -1;     // v1 memory.max_usage_in_bytes (rw); v2 memory.peak
  int current_fd_ = -1;  // v2 memory.current, for the baseline when peaks do not reset
  int oom_fd_ = -1;      // v1 memory.oom_control; v2 memory.events
  bool peak_resets_ = false;
  // Per command, written by begin_command() for end_command(); main thread only.
  bool begun_ = false;            // the counters were read before the launch
  std::int64_t baseline_ = 0;
  std::int64_t peak_before_ = 0;  // v2 without reset: the slot's lifetime peak so far
  std::int64_t oom_kills_before_ = 0;
};

/// The peak a reply carries: the cgroup's when it measured the command, never below
/// the largest single process (ru_maxrss, `max_rss_kb`): page cache of earlier commands
/// reclaimed while this one ran lowers the cgroup's figure, never a process's RSS.
/// `from_cgroup` says which source was used.
std::int64_t reported_peak_bytes(const CommandMemory& memory, long max_rss_kb,
                                 bool& from_cgroup);

}  // namespace spawnpool::detail
