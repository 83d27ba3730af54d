// A spawner's view of its slot's cgroup, in one of two modes:
// - A cgroup per command (v2, where clone3(CLONE_INTO_CGROUP) works: kernel 5.7+): each
//   command gets a fresh cgroup below the slot, slot-<n>/cmd-<spawner pid>-<k>, made just
//   before the launch; the child is born in it (child_start.h), so nothing migrates, and
//   its memory.peak (5.19+) is the command's own without a reset. Kernels without
//   memory.peak (5.14, 5.15) have memory.current sampled while the command runs. After
//   the reap the cgroup is removed; one that still holds processes the command left
//   behind stays until they are gone (retried before each command; the slot's kill-all
//   and the pool's sweep reach it). The slot then holds no process itself: it gives
//   its children the memory controller.
// - The slot's own cgroup (v1; v2 where the spawner's probe found no CLONE_INTO_CGROUP):
//   the child writes its pid into the slot's cgroup.procs before exec, and the slot's
//   peak is reset before each command (v1, v2 from 6.12) or read against a baseline.
// Threading: open(), use_slot_cgroup(), begin_command(), sample_memory() and
// end_command() on the spawner's main thread; kill_all() and signal_all() from any
// thread (the watch thread), also while a command runs; they use only the slot's
// directory, fixed by open(), and reach the command cgroups through it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {

/// One command's memory as its slot's cgroup saw it.
struct CommandMemory {
  bool measured = false;  ///< false: the cgroup gave no peak for it (use ru_maxrss)
  bool sampled = false;   ///< the peak is the highest memory.current sampled (no memory.peak)
  /// A command cgroup's peak. In the slot's cgroup: the slot's highest usage while the
  /// command ran minus baseline_bytes, what the command added (earlier commands' page
  /// cache and leftover processes stay charged to the slot; subtracting them keeps a
  /// small command small).
  std::int64_t peak_bytes = 0;
  std::int64_t baseline_bytes = 0;  ///< the slot's usage when the command started (0: own cgroup)
  bool oom_killed = false;  ///< the OOM killer killed a process of the slot meanwhile
};

/// Options for tests: the production defaults are right everywhere else.
struct SlotCgroupOpenOptions {
  bool allow_peak_reset = true;  ///< false: behave as on a kernel without memory.peak reset
  bool require_cgroupfs = true;  ///< false: accept a plain directory of fake files
  /// v2: a cgroup per command (the spawner probes clone3 and calls use_slot_cgroup()
  /// where it is refused). False: the slot's own cgroup, as on v1.
  bool per_command = true;
  /// False: behave as on a kernel without memory.peak (before 5.19): sample
  /// memory.current of the command's cgroup.
  bool use_peak_file = true;
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
  bool measures_memory() const {
    return per_command_ ? command_memory_ : peak_fd_ >= 0 && oom_fd_ >= 0;
  }
  /// A cgroup per command (v2). False: commands join the slot's own cgroup.
  bool per_command() const { return per_command_; }
  /// Per command, without memory.peak: memory.current is sampled (sample_memory()).
  bool samples_memory() const { return per_command_ && command_memory_ && !has_peak_file_; }
  /// Leaves the cgroup-per-command mode for the slot's own cgroup, for good (the
  /// spawner's probe found that the kernel cannot start a child in a cgroup). True when
  /// the slot can take processes again (memory back off in its subtree_control).
  bool use_slot_cgroup(std::string& why);
  /// v1 always; v2 from kernel 6.12 (memory.peak takes a write, per open file).
  bool peak_resets() const { return peak_resets_; }
  const SlotCgroupConfig& config() const { return config_; }

  /// The slot's cgroup.procs, open for writing (close-on-exec): the child passes it to
  /// join_cgroup_from_child() before exec. -1 when not open, and per command.
  int procs_fd() const { return per_command_ ? -1 : procs_fd_; }
  /// Per command, between begin_command() and end_command(): the directory of the
  /// command's cgroup, for clone3(CLONE_INTO_CGROUP). -1 otherwise (also when it could
  /// not be made: the command then runs outside any cgroup of the pool).
  int command_cgroup_fd() const { return command_fd_; }

  /// Just before a launch. Per command: removes what earlier commands' cgroups it can,
  /// makes the command's cgroup and opens its counters (a mkdir and three opens, no
  /// allocation). Else: resets the slot's peak to its current usage (the baseline) and
  /// notes the OOM kill counter (three system calls).
  void begin_command();
  /// While the command runs, per command without memory.peak: one read of
  /// memory.current, kept when it is the highest so far. Does nothing otherwise.
  void sample_memory();
  /// After the command was reaped: its peak and whether the OOM killer struck (two
  /// reads); per command, then removes its cgroup (or keeps it for later while processes
  /// the command left run there). `joined`: whether the child joined (was born in) the
  /// cgroup; a child that did not is not measured.
  CommandMemory end_command(bool joined);

  /// SIGKILLs every process in the slot (the command, its process group, whatever left
  /// it) and waits until none is left, at most `timeout`. True once empty; false also
  /// when not open (the caller then ends the command's process group as before).
  bool kill_all(std::chrono::milliseconds timeout) const;
  /// Sends `sig` once to every process in the slot; returns how many were listed.
  int signal_all(int sig) const;

 private:
  void open_memory_files(const SlotCgroupOpenOptions& options);
  bool start_per_command(const SlotCgroupOpenOptions& options);
  void remove_empty_command_cgroups();
  void make_command_cgroup();
  void close_command_files();
  CommandMemory end_own_command(bool joined);
  bool read_peak(std::int64_t& bytes) const;
  bool read_oom_kills(std::int64_t& count) const;

  SlotCgroupConfig config_;
  SlotCgroupOpenOptions options_;
  // Per command (v2).
  bool per_command_ = false;
  bool command_memory_ = false;   // the command cgroups get the memory controller
  bool has_peak_file_ = false;    // they have memory.peak (5.19+); else sampled
  std::uint64_t command_count_ = 0;  // names the next command cgroup
  char command_name_[48] = {};   // the current command cgroup's name in the slot
  int command_fd_ = -1;          // its directory
  int command_peak_fd_ = -1;     // its memory.peak, or memory.current when sampled
  int command_events_fd_ = -1;   // its memory.events
  std::int64_t sampled_peak_ = 0;  // the highest memory.current sampled for this command
  std::vector<std::string> leftovers_;  // command cgroups still holding processes
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
