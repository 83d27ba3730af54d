#include "worker_pool/spawner/descendants.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace spawnpool::detail {
namespace {

struct ProcessEntry {
  pid_t pid = 0;
  pid_t parent = 0;
  pid_t group = 0;
  bool zombie = false;
};

// Fields 3-5 of /proc/PID/stat: state, parent, process group (after the command name,
// which may itself hold ") ").
bool read_stat(pid_t pid, ProcessEntry& entry) {
  char path[32];
  std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char text[512];
  const ssize_t n = read(fd, text, sizeof text - 1);
  close(fd);
  if (n <= 0) return false;
  text[n] = '\0';
  const char* name_end = std::strrchr(text, ')');
  char state = 0;
  int parent = 0, group = 0;
  if (name_end == nullptr || std::sscanf(name_end + 1, " %c %d %d", &state, &parent, &group) != 3)
    return false;
  entry.pid = pid;
  entry.parent = parent;
  entry.group = group;
  entry.zombie = state == 'Z' || state == 'X';
  return true;
}

std::vector<ProcessEntry> all_processes() {
  std::vector<ProcessEntry> found;
  DIR* dir = opendir("/proc");
  if (dir == nullptr) return found;
  while (const dirent* item = readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(item->d_name, &end, 10);
    ProcessEntry entry;
    if (pid > 0 && *end == '\0' && read_stat(static_cast<pid_t>(pid), entry)) found.push_back(entry);
  }
  closedir(dir);
  return found;
}

// This process's descendants, parents before children (a breadth-first walk of the
// parent links; each process has one parent, so none is listed twice).
std::vector<ProcessEntry> descendants() {
  const std::vector<ProcessEntry> all = all_processes();
  std::vector<ProcessEntry> found;
  std::vector<pid_t> parents{getpid()};
  for (std::size_t next = 0; next < parents.size(); ++next)
    for (const ProcessEntry& entry : all)
      if (entry.parent == parents[next]) {
        found.push_back(entry);
        if (!entry.zombie) parents.push_back(entry.pid);
      }
  return found;
}

// Pinned by a pidfd, the process is checked again to be the one found (still the child
// of the same parent, or of ours once that parent exited): a recycled pid is never hit.
bool signal_pinned(const ProcessEntry& found, int sig) {
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, found.pid, 0));
  if (fd < 0 && errno != ENOSYS) return false;  // gone
  ProcessEntry now;
  bool same = read_stat(found.pid, now) && !now.zombie &&
              (now.parent == found.parent || now.parent == getpid());
  if (same)
    same = fd >= 0 ? syscall(SYS_pidfd_send_signal, fd, sig, nullptr, 0) == 0
                   : kill(found.pid, sig) == 0;  // kernels before 5.3
  if (fd >= 0) close(fd);
  return same;
}

void sleep_briefly() {
  timespec pause{0, 2 * 1000 * 1000};
  nanosleep(&pause, nullptr);
}

}  // namespace

bool become_subreaper() { return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0; }

int signal_descendants(int sig, pid_t skip_group) {
  int signalled = 0;
  for (const ProcessEntry& entry : descendants())
    if (!entry.zombie && entry.group != skip_group && signal_pinned(entry, sig)) ++signalled;
  return signalled;
}

// Loop structure: walk, SIGKILL what lives, reap the inherited children that died, until
// a walk finds nothing alive (or the time is up).
bool kill_descendants(pid_t command, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const pid_t self = getpid();
  for (;;) {
    int alive = 0;
    for (const ProcessEntry& entry : descendants()) {
      if (entry.zombie) {
        if (entry.parent == self && entry.pid != command) waitpid(entry.pid, nullptr, WNOHANG);
      } else if (signal_pinned(entry, SIGKILL)) {
        ++alive;
      }
    }
    if (alive == 0) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    sleep_briefly();
  }
}

void reap_exited_children() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

}  // namespace spawnpool::detail
