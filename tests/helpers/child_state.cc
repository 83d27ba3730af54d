// child_state: prints, one "key=value" per line, what a command inherits from the
// spawner: its ids and process group, cwd, what fd 0 is, its open fds, its blocked,
// ignored and handled signals, its parent-death signal, its CPU affinity, and every
// resource limit as "soft:hard".
//
// `child_state --wait-for-cpus N` first waits (up to 5 s) until it may run on N CPUs: a
// command started pinned whose set the spawner widens from outside right after the start
// (a sandbox that refuses a thread's own sched_setaffinity) may look before the widening.
#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "tests/helpers/write_all.h"

namespace {

std::string fd_list() {
  std::string out;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return "?";
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    const int fd = std::atoi(entry->d_name);
    if (fd == dirfd(dir)) continue;
    out += (out.empty() ? "" : ",") + std::to_string(fd);
  }
  closedir(dir);
  return out;
}

std::string link_target(const char* path) {
  char buffer[PATH_MAX];
  const ssize_t n = readlink(path, buffer, sizeof buffer);
  return n < 0 ? "?" : std::string(buffer, static_cast<std::size_t>(n));
}

// Signals (1..SIGRTMAX) for which `pick` is true, comma-separated.
template <typename Pick>
std::string signal_list(Pick pick) {
  std::string out;
  for (int sig = 1; sig <= SIGRTMAX; ++sig)
    if (pick(sig)) out += (out.empty() ? "" : ",") + std::to_string(sig);
  return out;
}

std::string cpu_list() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return "?";
  std::string out;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) out += (out.empty() ? "" : ",") + std::to_string(cpu);
  return out;
}

// Waits until the calling thread's set has `count` CPUs, or 5 s have passed.
void wait_for_cpus(int count) {
  for (int waited_ms = 0; waited_ms < 5000; ++waited_ms) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) >= count) return;
    usleep(1000);
  }
}

std::string limit(int resource) {
  rlimit rl{};
  if (getrlimit(resource, &rl) != 0) return "?";
  auto text = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("inf") : std::to_string(v); };
  return text(rl.rlim_cur) + ":" + text(rl.rlim_max);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--wait-for-cpus") wait_for_cpus(std::atoi(argv[2]));
  sigset_t blocked;
  sigprocmask(SIG_BLOCK, nullptr, &blocked);
  auto disposition = [](int sig) {
    struct sigaction action {};
    sigaction(sig, nullptr, &action);
    return action.sa_handler;
  };
  char cwd[PATH_MAX];
  std::string out;
  out += "pid=" + std::to_string(getpid()) + "\n";
  out += "ppid=" + std::to_string(getppid()) + "\n";
  out += "pgid=" + std::to_string(getpgrp()) + "\n";
  out += "sid=" + std::to_string(getsid(0)) + "\n";
  out += "cwd=" + std::string(getcwd(cwd, sizeof cwd) ? cwd : "?") + "\n";
  out += "stdin=" + link_target("/proc/self/fd/0") + "\n";
  out += "fds=" + fd_list() + "\n";
  out += "blocked=" + signal_list([&](int sig) { return sigismember(&blocked, sig) == 1; }) + "\n";
  out += "ignored=" + signal_list([&](int sig) { return disposition(sig) == SIG_IGN; }) + "\n";
  out += "handled=" + signal_list([&](int sig) {
           const auto h = disposition(sig);
           return h != SIG_IGN && h != SIG_DFL;
         }) + "\n";
  int parent_death_signal = -1;
  prctl(PR_GET_PDEATHSIG, &parent_death_signal);
  out += "pdeathsig=" + std::to_string(parent_death_signal) + "\n";
  out += "cpus=" + cpu_list() + "\n";
  const struct {
    const char* name;
    int resource;
  } limits[] = {{"AS", RLIMIT_AS},         {"CORE", RLIMIT_CORE},
                {"CPU", RLIMIT_CPU},       {"DATA", RLIMIT_DATA},
                {"FSIZE", RLIMIT_FSIZE},   {"LOCKS", RLIMIT_LOCKS},
                {"MEMLOCK", RLIMIT_MEMLOCK}, {"MSGQUEUE", RLIMIT_MSGQUEUE},
                {"NICE", RLIMIT_NICE},     {"NOFILE", RLIMIT_NOFILE},
                {"NPROC", RLIMIT_NPROC},   {"RSS", RLIMIT_RSS},
                {"RTPRIO", RLIMIT_RTPRIO}, {"RTTIME", RLIMIT_RTTIME},
                {"SIGPENDING", RLIMIT_SIGPENDING}, {"STACK", RLIMIT_STACK}};
  for (const auto& l : limits)
    out += "rlimit." + std::string(l.name) + "=" + limit(l.resource) + "\n";
  spawnpool::test::write_all(1, out.data(), out.size());
  return 0;
}
