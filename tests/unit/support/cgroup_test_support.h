// What the cgroup tests share: a cgroup of the test's own under this process's cgroup
// (removed with everything below it however the test ends; those of crashed earlier
// runs are removed first), the reason to skip where no hierarchy is writable, and a
// harness that starts a command as the spawner's child will (fork, join the slot's
// cgroup, own process group, exec). Single-threaded, like the tests.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/unit/support/test_skip.h"
#include "worker_pool/cgroup/cgroup_config.h"

namespace spawnpool::detail {
class SlotCgroup;
}

namespace spawnpool::test {

/// Kills what runs in `dir` and in every cgroup below it, and removes them all.
bool remove_cgroup_tree(const std::string& dir, detail::CgroupVersion version);

/// The names of the cgroups directly below `dir`.
std::vector<std::string> child_cgroups(const std::string& dir);

/// <base>/cgtest-<pid>-<random>, removed (tree and processes) on destruction. On v2 its
/// children get the memory controller ("+memory" in its subtree_control); where `base`
/// holds this process, the process first moves into <base>/spawnpool-<pid>-driver, as a
/// driver does, and back when its last test cgroup is gone.
class TestCgroup {
 public:
  /// Under this process's memory cgroup (v1 or v2). Null with `why_not` when there is
  /// none or it is not writable.
  static std::unique_ptr<TestCgroup> in_memory_hierarchy(std::string& why_not);
  /// Under this process's cgroup in the unified (v2) hierarchy, with or without
  /// controllers (on a hybrid machine: kill and placement, no memory files).
  static std::unique_ptr<TestCgroup> in_unified_hierarchy(std::string& why_not);
  ~TestCgroup();
  TestCgroup(const TestCgroup&) = delete;
  TestCgroup& operator=(const TestCgroup&) = delete;

  const std::string& dir() const { return dir_; }
  detail::CgroupVersion version() const { return version_; }
  /// Creates the child cgroup `name` (a slot of a hand-made pool, say).
  std::string make_child(const std::string& name) const;

 private:
  TestCgroup(std::string dir, detail::CgroupVersion version)
      : dir_(std::move(dir)), version_(version) {}
  static std::unique_ptr<TestCgroup> under(const std::string& base, std::string& why_not);
  std::string dir_;
  detail::CgroupVersion version_;
  std::uint32_t home_flags_ = 0;  // what leaving a v2 home did (0: stayed home)
};

/// What every cgroup test that starts processes does around its body: this process is
/// made the reaper of orphans, a LeakCheck spans it all, `body` gets a fresh test cgroup
/// (of the memory hierarchy, or with `unified` the v2 one), and every child is reaped
/// at the end. Where no such cgroup can be made the test is skipped with the reason.
void with_test_cgroup(bool unified, const std::function<void(const TestCgroup&)>& body);

/// A command started by start_in_slot().
struct StartedCommand {
  pid_t pid = -1;
  int join_error = 0;  // join_cgroup_from_child()'s result in the child
  int stdout_fd = -1;  // read end of its stdout when captured, else -1
};

/// Starts `argv` (argv[0] a path) as the spawner's child will: fork, join the cgroup
/// whose cgroup.procs is `procs_fd` (skipped when -1), a process group of its own, exec.
StartedCommand start_in_slot(int procs_fd, const std::vector<std::string>& argv,
                             bool capture_stdout = false);

/// Starts `argv` (argv[0] a path) with the spawner's own start_child() in `slot`'s
/// cgroup as it stands: born in the command's cgroup (between begin_command() and
/// end_command() of a slot with a cgroup per command), or joining the slot's. stdin is
/// /dev/null. join_error: the child's cgroup_join_error; -1 when it had no cgroup to go to.
StartedCommand start_in(const detail::SlotCgroup& slot, const std::vector<std::string>& argv,
                        bool capture_stdout = false);

struct Reaped {
  int status = 0;
  long max_rss_kb = 0;
};

/// wait4() for `pid`.
Reaped reap(pid_t pid);

/// Everything `fd` gives until EOF; closes it.
std::string read_until_eof(int fd);

/// Makes this process the reaper of its orphaned descendants (this machine's PID 1 does
/// not reap them), so a killed grandchild can be reaped here.
void become_subreaper();

/// Reaps children until none is left (ECHILD) or `timeout` passes; true at ECHILD.
bool reap_all_children(std::chrono::milliseconds timeout);

/// Whether `pid` is gone or a zombie.
bool process_is_gone(pid_t pid);

/// This process's memory cgroup path as /proc/<pid>/cgroup lists it for the v1 memory
/// or the v2 hierarchy ("" when not listed).
std::string cgroup_of(pid_t pid, detail::CgroupVersion version);

}  // namespace spawnpool::test
