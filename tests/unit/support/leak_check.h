// Leak checks for every test that starts processes. Construct a LeakCheck first thing in
// the test (before any Pool), destroy every Pool and Job, then call verify(). Not
// thread-safe: use it from the test's main thread while no other test thread runs.
//
// What verify() checks, and why each check is true of a correct pool:
//  - the same set of open fds as at construction (the segment, eventfd, lifelines and
//    pidfds all belong to the pool and go with it);
//  - no child process at all, zombie or alive: waitid(P_ALL, WNOHANG | WNOWAIT) gives
//    ECHILD. The test process's only children are its pools' spawners, which close()
//    reaps (a spawner that died is reaped by the monitor); commands are the spawners'
//    children, never ours. WNOWAIT keeps a zombie in place for the message;
//  - no process still carrying this test's marker variable: the constructor puts
//    SPAWNPOOL_TEST_OWNER=<pid> in the environment, spawners inherit it and so do the
//    commands run with the driver's environment, so a spawner or command left running
//    (orphaned, reparented to init) is found in /proc/*/environ. Killed processes get a
//    few seconds to die;
//  - no pool segment left in this process: no descriptor and no mapping of a memfd named
//    spawnpool-segment (/proc/self/fd links and /proc/self/maps lines "/memfd:spawnpool-
//    segment (deleted)"). A segment has no name anywhere else, so nothing outlives the
//    processes that hold it; still no /dev/shm/spawnpool-* entry may appear and stay
//    (builds from before the memfd segment, run by other test processes at the same
//    time, unlinked theirs within milliseconds: hence the grace period).
#pragma once

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tests/unit/support/test_support.h"

namespace spawnpool::test {

inline constexpr const char* kMarkerName = "SPAWNPOOL_TEST_OWNER";
/// How a pool segment shows in /proc/self/fd and /proc/self/maps
/// (engine/src/spawners/segment.h, kSegmentMemfdName).
inline constexpr const char* kSegmentMemfd = "/memfd:spawnpool-segment";

/// Open fds of this process with what each refers to.
inline std::map<int, std::string> open_fds() {
  std::map<int, std::string> fds;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return fds;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dirfd(dir)) continue;
    char target[PATH_MAX];
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t n = readlink(link.c_str(), target, sizeof target);
    fds[fd] = n > 0 ? std::string(target, static_cast<std::size_t>(n)) : "?";
  }
  closedir(dir);
  return fds;
}

inline std::set<std::string> shm_entries() {
  std::set<std::string> names;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir))
      if (std::string(entry->d_name).rfind("spawnpool-", 0) == 0) names.insert(entry->d_name);
    closedir(dir);
  }
  return names;
}

/// Live processes (other than this one) whose environment holds `entry` exactly.
inline std::vector<int> processes_with_env(const std::string& entry) {
  std::vector<int> found;
  const int self = getpid();
  if (DIR* dir = opendir("/proc")) {
    while (dirent* e = readdir(dir)) {
      const int pid = std::atoi(e->d_name);
      if (pid <= 0 || pid == self || process_gone(pid)) continue;
      const std::string env = read_file("/proc/" + std::to_string(pid) + "/environ");
      for (const auto& var : split_nul(env))
        if (var == entry) found.push_back(pid);
    }
    closedir(dir);
  }
  return found;
}

inline std::string describe_process(int pid) {
  const ProcStat st = proc_stat(pid);
  std::string cmdline = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : cmdline)
    if (c == '\0') c = ' ';
  return std::to_string(pid) + " (state " + std::string(1, st.state ? st.state : '-') +
         ", ppid " + std::to_string(st.ppid) + "): " + cmdline;
}

/// Spawners whose pids were taken before close(): none may still be our child.
inline void check_spawners_gone(const std::vector<int>& spawner_pids) {
  for (int pid : spawner_pids) {
    INFO("spawner " << describe_process(pid));
    const ProcStat st = proc_stat(pid);
    CHECK((st.state == 0 || st.ppid != getpid()));
  }
}

class LeakCheck {
 public:
  LeakCheck()
      : marker_(std::string(kMarkerName) + "=" + std::to_string(getpid())),
        fds_(open_fds()),
        shm_(shm_entries()) {
    setenv(kMarkerName, std::to_string(getpid()).c_str(), 1);
  }
  LeakCheck(const LeakCheck&) = delete;
  LeakCheck& operator=(const LeakCheck&) = delete;

  void verify() const {
    check_fds();
    check_children();
    check_marked_processes();
    check_shared_memory();
  }

 private:
  void check_fds() const {
    const auto now = open_fds();
    std::string diff;
    for (const auto& [fd, target] : now)
      if (!fds_.count(fd)) diff += " +" + std::to_string(fd) + "=" + target;
    for (const auto& [fd, target] : fds_)
      if (!now.count(fd)) diff += " -" + std::to_string(fd) + "=" + target;
    INFO("open fds changed:" << diff);
    CHECK(diff.empty());
  }

  static void check_children() {
    siginfo_t info{};
    int rc;
    do rc = waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT);
    while (rc < 0 && errno == EINTR);
    const int error = rc < 0 ? errno : 0;
    std::string children;
    for (int pid : children_of(getpid())) children += "\n  " + describe_process(pid);
    if (rc == 0 && info.si_pid != 0) children += "\n  zombie " + std::to_string(info.si_pid);
    INFO("children left:" << children);
    CHECK(rc == -1);
    CHECK(error == ECHILD);
  }

  void check_marked_processes() const {
    std::vector<int> left;
    wait_until([&] {
      left = processes_with_env(marker_);
      return left.empty();
    }, std::chrono::seconds(5));
    std::string list;
    for (int pid : left) list += "\n  " + describe_process(pid);
    INFO("processes of this test still running:" << list);
    CHECK(left.empty());
  }

  void check_shared_memory() const {
    const std::string maps = read_file("/proc/self/maps");
    INFO("/proc/self/maps:\n" << maps);
    CHECK(maps.find(kSegmentMemfd) == std::string::npos);
    CHECK(maps.find("/dev/shm/spawnpool-") == std::string::npos);
    std::string segment_fds;
    for (const auto& [fd, target] : open_fds())
      if (target.rfind(kSegmentMemfd, 0) == 0) segment_fds += " " + std::to_string(fd);
    INFO("descriptors of a pool segment left:" << segment_fds);
    CHECK(segment_fds.empty());
    std::set<std::string> added;
    wait_until([&] {
      added.clear();
      for (const auto& name : shm_entries())
        if (!shm_.count(name)) added.insert(name);
      return added.empty();
    }, std::chrono::seconds(3));
    std::string list;
    for (const auto& name : added) list += " " + name;
    INFO("/dev/shm entries left:" << list);
    CHECK(added.empty());
  }

  std::string marker_;
  std::map<int, std::string> fds_;
  std::set<std::string> shm_;
};

}  // namespace spawnpool::test
