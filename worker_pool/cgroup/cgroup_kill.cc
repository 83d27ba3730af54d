#include "worker_pool/cgroup/cgroup_kill.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::detail {
namespace {

using Clock = std::chrono::steady_clock;

void sleep_briefly() {
  const timespec pause{0, 1000 * 1000};  // 1 ms: a SIGKILLed process needs a moment
  nanosleep(&pause, nullptr);
}

bool read_pids(int dir_fd, std::string& buffer, std::vector<pid_t>& pids) {
  const bool ok = with_file_at(dir_fd, "cgroup.procs", O_RDONLY,
                               [&](int fd) { return read_all(fd, buffer); });
  if (ok) pids = parse_pid_list(buffer);
  return ok;
}

void send(pid_t pid, int pidfd, int sig) {
  if (pidfd >= 0)
    syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0);
  else
    kill(pid, sig);  // no pidfds (kernel < 5.3): the recheck still narrows the window
}

// v2, kernel 5.14+: false when there is no cgroup.kill (the caller loops instead).
bool write_cgroup_kill(int dir_fd) {
  const int fd = open_at(dir_fd, "cgroup.kill", O_WRONLY);
  if (fd < 0) return false;
  const bool ok = write_text(fd, "1");
  close(fd);
  return ok;
}

// v2: waits for "populated 0" in cgroup.events; the kernel wakes poll() (POLLPRI) when
// the file changes, and the 10 ms cap makes a missed notification cost little.
bool wait_unpopulated(int dir_fd, Clock::time_point deadline) {
  const int fd = open_at(dir_fd, "cgroup.events", O_RDONLY);
  if (fd < 0) return errno == ENOENT;  // removed meanwhile: empty
  bool empty = false;
  for (;;) {
    std::int64_t populated = 1;
    if (!read_keyed_value(fd, "populated", populated)) {
      empty = errno == ENOENT || errno == ENODEV;
      break;
    }
    if (populated == 0) {
      empty = true;
      break;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - Clock::now());
    if (left.count() <= 0) break;
    pollfd wait{fd, POLLPRI, 0};
    poll(&wait, 1, static_cast<int>(std::min<long long>(left.count(), 10)));
  }
  close(fd);
  return empty;
}

}  // namespace

int signal_cgroup_processes(int dir_fd, int sig) {
  std::string buffer;
  std::vector<pid_t> listed, still_listed;
  if (!read_pids(dir_fd, buffer, listed)) {
    // A cgroup removed meanwhile (by another sweeper) holds nothing any more.
    return errno == ENOENT || errno == ENODEV ? 0 : -1;
  }
  std::vector<int> pidfds(listed.size(), -1);
  for (std::size_t i = 0; i < listed.size(); ++i)
    pidfds[i] = static_cast<int>(syscall(SYS_pidfd_open, listed[i], 0));
  // Only after every pidfd is open: a pid still listed now is the process its pidfd
  // holds, or one that reused the pid inside this cgroup, which is fair game too.
  const bool reread = read_pids(dir_fd, buffer, still_listed);
  std::sort(still_listed.begin(), still_listed.end());
  for (std::size_t i = 0; i < listed.size(); ++i) {
    if (reread && std::binary_search(still_listed.begin(), still_listed.end(), listed[i]))
      send(listed[i], pidfds[i], sig);
    if (pidfds[i] >= 0) close(pidfds[i]);
  }
  return static_cast<int>(listed.size());
}

// Depth-first: a cgroup's children are listed by their directories.
int signal_cgroup_tree(int dir_fd, int sig) {
  int listed = signal_cgroup_processes(dir_fd, sig);
  if (listed < 0) return listed;
  for (const std::string& child : subdirectories(dir_fd, "")) {
    const int child_fd = open_at(dir_fd, child.c_str(), O_RDONLY | O_DIRECTORY);
    if (child_fd < 0) continue;  // removed meanwhile
    const int below = signal_cgroup_tree(child_fd, sig);
    close(child_fd);
    if (below > 0) listed += below;
  }
  return listed;
}

bool kill_cgroup_processes(int dir_fd, CgroupVersion version, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  if (version == CgroupVersion::kV2 && write_cgroup_kill(dir_fd))
    return wait_unpopulated(dir_fd, deadline);
  for (;;) {
    const int listed = signal_cgroup_tree(dir_fd, SIGKILL);
    if (listed == 0) return true;
    if (listed < 0 || Clock::now() > deadline) return false;
    sleep_briefly();
  }
}

bool remove_cgroup_dir(int parent_fd, const char* name, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    if (unlinkat(parent_fd, name, AT_REMOVEDIR) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY || Clock::now() > deadline) return false;
    sleep_briefly();
  }
}

}  // namespace spawnpool::detail
