#include "tests/unit/support/cgroup_test_support.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <catch2/catch.hpp>
#include <thread>

#include "worker_pool/cgroup/cgroup_discovery.h"
#include "tests/unit/support/leak_check.h"
#include "worker_pool/cgroup/cgroup_files.h"
#include "worker_pool/cgroup/cgroup_join.h"
#include "worker_pool/cgroup/cgroup_kill.h"
#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/spawner/child_start.h"
#include "worker_pool/cgroup/cgroup_sweep.h"
#include "worker_pool/cgroup/cgroup_v2_home.h"

namespace spawnpool::test {
namespace {

using detail::CgroupVersion;

}  // namespace

std::vector<std::string> child_cgroups(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* listing = opendir(dir.c_str())) {
    while (dirent* entry = readdir(listing)) {
      const std::string name = entry->d_name;
      if (entry->d_type == DT_DIR && name != "." && name != "..") names.push_back(name);
    }
    closedir(listing);
  }
  return names;
}

namespace {

// cgtest-<pid>-... and spawnpool-<pid>-... whose process is gone: left by a test run
// that crashed before its destructors ran.
void remove_stale_test_cgroups(const std::string& base, CgroupVersion version) {
  for (const std::string& name : child_cgroups(base)) {
    for (const std::string prefix : {"cgtest-", "spawnpool-"}) {
      if (name.rfind(prefix, 0) != 0) continue;
      const int pid = std::atoi(name.c_str() + prefix.size());
      if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
        remove_cgroup_tree(base + "/" + name, version);
    }
  }
}

}  // namespace

namespace {

bool lists_word(const std::string& text, const std::string& word) {
  return (" " + text.substr(0, text.find('\n')) + " ").find(" " + word + " ") !=
         std::string::npos;
}

// leave_v2_home() where `base` cannot give its children memory yet: not at the root
// cgroup (exempt from the rule), nor where its subtree_control has memory already.
bool leave_v2_home_if_needed(const std::string& base, std::string& home,
                             std::uint32_t& flags, std::string& why) {
  std::string subtree;
  detail::read_file_text(base + "/cgroup.subtree_control", subtree);
  const std::string above = base.substr(0, base.find_last_of('/'));
  if (lists_word(subtree, "memory") || detail::cgroup_version_of(above) != CgroupVersion::kV2)
    return true;
  return detail::leave_v2_home(base, home, flags, why);
}

// Undoes leave_v2_home_if_needed() once this process's last test cgroup is gone.
void return_home(const std::string& home, std::uint32_t flags) {
  if (flags == 0) return;
  std::lock_guard<std::mutex> lock(detail::v2_home_mutex());
  for (const std::string& name : child_cgroups(home))
    if (name.rfind("cgtest-" + std::to_string(getpid()) + "-", 0) == 0) return;
  std::string ignored;
  detail::restore_driver_home(home, getpid(), flags, ignored);
}

}  // namespace

bool remove_cgroup_tree(const std::string& dir, CgroupVersion version) {
  bool removed = true;
  for (const std::string& name : child_cgroups(dir))
    removed = remove_cgroup_tree(dir + "/" + name, version) && removed;
  const int fd = detail::open_at(AT_FDCWD, dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return errno == ENOENT && removed;
  detail::kill_cgroup_processes(fd, version, std::chrono::seconds(5));
  close(fd);
  const std::string parent = dir.substr(0, dir.find_last_of('/'));
  const int parent_fd = detail::open_at(AT_FDCWD, parent.c_str(), O_RDONLY | O_DIRECTORY);
  if (parent_fd < 0) return false;
  removed = detail::remove_cgroup_dir(parent_fd, dir.substr(dir.find_last_of('/') + 1).c_str(),
                                      std::chrono::seconds(5)) && removed;
  close(parent_fd);
  return removed;
}

std::unique_ptr<TestCgroup> TestCgroup::under(const std::string& base, std::string& why_not) {
  const CgroupVersion version = detail::cgroup_version_of(base);
  if (version == CgroupVersion::kNone) {
    why_not = "'" + base + "' is not a cgroup";
    return nullptr;
  }
  remove_stale_test_cgroups(base, version);
  std::uint32_t random = 0;
  if (getrandom(&random, sizeof random, 0) != sizeof random)
    random = static_cast<std::uint32_t>(time(nullptr));
  // v2: a cgroup that holds this process gives its children no controller (the "no
  // internal processes" rule, the root cgroup aside), so the test leaves home as a
  // driver does (cgroup_v2_home.h): into a leaf beside its test cgroup.
  std::string home = base;
  std::uint32_t home_flags = 0;
  if (version == CgroupVersion::kV2) {
    std::lock_guard<std::mutex> lock(detail::v2_home_mutex());
    if (!leave_v2_home_if_needed(base, home, home_flags, why_not)) return nullptr;
  }
  const std::string dir =
      home + "/cgtest-" + std::to_string(getpid()) + "-" + std::to_string(random);
  if (mkdir(dir.c_str(), 0755) != 0) {
    why_not = "cannot create a test cgroup in " + home + ": " + std::strerror(errno);
    return_home(home, home_flags);
    return nullptr;
  }
  std::unique_ptr<TestCgroup> cgroup(new TestCgroup(dir, version));
  cgroup->home_flags_ = home_flags;
  // What the slots below need: the memory controller for the test cgroup's children.
  std::string controllers;
  detail::read_file_text(dir + "/cgroup.controllers", controllers);
  if (version == CgroupVersion::kV2 && lists_word(controllers, "memory") &&
      !detail::write_file_text(dir + "/cgroup.subtree_control", "+memory")) {
    why_not = "cannot enable memory in " + dir + "/cgroup.subtree_control: " +
              std::strerror(errno);
    return nullptr;
  }
  return cgroup;
}

std::unique_ptr<TestCgroup> TestCgroup::in_memory_hierarchy(std::string& why_not) {
  const detail::CgroupHierarchy found = detail::find_memory_hierarchy();
  if (found.version == CgroupVersion::kNone) {
    why_not = "no memory cgroup: " + found.why_not;
    return nullptr;
  }
  return under(found.dir, why_not);
}

std::unique_ptr<TestCgroup> TestCgroup::in_unified_hierarchy(std::string& why_not) {
  const detail::CgroupHierarchy found = detail::find_memory_hierarchy();
  if (found.v2_dir.empty()) {
    why_not = "no cgroup2 hierarchy mounted";
    return nullptr;
  }
  return under(found.v2_dir, why_not);
}

TestCgroup::~TestCgroup() {
  remove_cgroup_tree(dir_, version_);
  return_home(dir_.substr(0, dir_.find_last_of('/')), home_flags_);
}

std::string TestCgroup::make_child(const std::string& name) const {
  const std::string child = dir_ + "/" + name;
  if (mkdir(child.c_str(), 0755) != 0 && errno != EEXIST) return "";
  return child;
}

void with_test_cgroup(bool unified, const std::function<void(const TestCgroup&)>& body) {
  become_subreaper();
  LeakCheck leaks;
  {
    std::string why;
    const auto cgroup = unified ? TestCgroup::in_unified_hierarchy(why)
                                : TestCgroup::in_memory_hierarchy(why);
    TEST_SKIP_UNLESS(cgroup, why);
    body(*cgroup);
    CHECK(reap_all_children(std::chrono::seconds(5)));
  }
  leaks.verify();
}

StartedCommand start_in_slot(int procs_fd, const std::vector<std::string>& argv,
                             bool capture_stdout) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  int report[2], out[2] = {-1, -1};
  if (pipe2(report, O_CLOEXEC) != 0) return {};
  if (capture_stdout && pipe2(out, O_CLOEXEC) != 0) return {};
  StartedCommand started;
  started.pid = fork();
  if (started.pid == 0) {
    // What child_start.cc's child will do first: join, then its own process group.
    const int join_error = procs_fd >= 0 ? detail::join_cgroup_from_child(procs_fd) : 0;
    if (write(report[1], &join_error, sizeof join_error) != sizeof join_error) _exit(126);
    setpgid(0, 0);
    if (capture_stdout) dup2(out[1], 1);
    execv(args[0], args.data());
    _exit(127);
  }
  close(report[1]);
  if (out[1] >= 0) close(out[1]);
  if (read(report[0], &started.join_error, sizeof started.join_error) != sizeof started.join_error)
    started.join_error = EIO;
  close(report[0]);
  started.stdout_fd = out[0];
  return started;
}

StartedCommand start_in(const detail::SlotCgroup& slot, const std::vector<std::string>& argv,
                        bool capture_stdout) {
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  int out[2] = {-1, -1};
  if (capture_stdout && pipe2(out, O_CLOEXEC) != 0) return {};
  const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  detail::ChildSetup setup;
  setup.path = args[0];
  setup.argv = args.data();
  setup.envp = environ;
  setup.stdin_fd = null_fd;
  setup.stdout_fd = out[1];
  setup.cgroup_procs_fd = slot.procs_fd();
  setup.cgroup_dir_fd = slot.command_cgroup_fd();
  const detail::ChildStart child = detail::start_child(setup);
  if (null_fd >= 0) close(null_fd);
  if (out[1] >= 0) close(out[1]);
  StartedCommand started;
  started.pid = child.pid;
  started.join_error = setup.cgroup_procs_fd < 0 && setup.cgroup_dir_fd < 0
                           ? -1 : child.cgroup_join_error;
  started.stdout_fd = out[0];
  return started;
}

Reaped reap(pid_t pid) {
  Reaped reaped;
  struct rusage usage {};
  while (wait4(pid, &reaped.status, 0, &usage) < 0 && errno == EINTR) {
  }
  reaped.max_rss_kb = usage.ru_maxrss;
  return reaped;
}

std::string read_until_eof(int fd) {
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
  }
  close(fd);
  return text;
}

void become_subreaper() { prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

bool reap_all_children(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const pid_t pid = waitpid(-1, nullptr, WNOHANG);
    if (pid < 0 && errno == ECHILD) return true;
    if (pid > 0) continue;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

bool process_is_gone(pid_t pid) {
  std::string stat;
  if (!detail::read_file_text("/proc/" + std::to_string(pid) + "/stat", stat)) return true;
  const std::size_t paren = stat.rfind(')');
  const char state = paren != std::string::npos && paren + 2 < stat.size() ? stat[paren + 2] : 0;
  return state == 'Z' || state == 'X' || state == 0;
}

std::string cgroup_of(pid_t pid, CgroupVersion version) {
  std::string text;
  detail::read_file_text("/proc/" + std::to_string(pid) + "/cgroup", text);
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(at, end - at);
    const std::size_t second = line.find(':', line.find(':') + 1);
    const std::string controllers = line.substr(line.find(':') + 1, second - line.find(':') - 1);
    const bool wanted = version == CgroupVersion::kV2
                            ? line.rfind("0::", 0) == 0
                            : ("," + controllers + ",").find(",memory,") != std::string::npos;
    if (wanted && second != std::string::npos) return line.substr(second + 1);
    at = end + 1;
  }
  return "";
}

}  // namespace spawnpool::test
