#include "worker_pool/spawner/command_waiter.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

namespace spawnpool::detail {
namespace {

constexpr std::size_t kReadSize = 64 * 1024;
constexpr int kLongestSampleGapMs = 10;

// When the next memory sample is due: doubling gaps from 1 ms up to kLongestSampleGapMs.
struct SampleClock {
  SlotCgroup* sampler;
  int gap_ms = 1;
  std::int64_t due_ns = 0;

  explicit SampleClock(SlotCgroup* s) : sampler(s) {
    if (sampler) {
      sampler->sample_memory();
      due_ns = monotonic_ns() + 1000000;
    }
  }
  // The poll timeout until the next sample (-1 without a sampler), `idle_ms` otherwise.
  int timeout_ms(int idle_ms) const {
    if (!sampler) return idle_ms;
    const std::int64_t left = due_ns - monotonic_ns();
    return left <= 0 ? 0 : static_cast<int>((left + 999999) / 1000000);
  }
  void sample_if_due() {
    if (!sampler || monotonic_ns() < due_ns) return;
    sampler->sample_memory();
    gap_ms = gap_ms * 2 > kLongestSampleGapMs ? kLongestSampleGapMs : gap_ms * 2;
    due_ns = monotonic_ns() + static_cast<std::int64_t>(gap_ms) * 1000000;
  }
};

// Reads what `fd` holds into `sink`. Returns false at EOF or error (fd is then closed).
bool read_available(int& fd, std::string& sink) {
  const std::size_t old_size = sink.size();
  sink.resize(old_size + kReadSize);
  ssize_t n;
  do n = read(fd, &sink[old_size], kReadSize);
  while (n < 0 && errno == EINTR);
  sink.resize(old_size + (n > 0 ? n : 0));
  if (n > 0 || (n < 0 && errno == EAGAIN)) return true;
  close(fd);
  fd = -1;
  return false;
}

// After the command exited, takes what is left without waiting for writers that
// outlive it (a daemonized grandchild may hold the pipe open for hours).
void drain_without_waiting(int& fd, std::string& sink) {
  if (fd < 0) return;
  // A blocking read could wait for such a writer forever: without O_NONBLOCK, take nothing.
  const int flags = fcntl(fd, F_GETFL);
  const bool nonblocking = flags >= 0 && fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0;
  while (nonblocking && fd >= 0) {
    const std::size_t before = sink.size();
    if (!read_available(fd, sink) || sink.size() == before) break;
  }
  if (fd >= 0) close(fd);
  fd = -1;
}

int open_pidfd(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

bool has_exited(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// Polls the output pipes and the child's exit. Loop structure: each round waits for
// output or exit; output is appended; once the child has exited, the pipes are drained
// without blocking and the loop ends. Without pidfds (kernel < 5.3) exit is polled.
void collect_until_exit(LaunchedCommand& command, CommandOutcome& outcome, SampleClock& clock) {
  const int pidfd = open_pidfd(command.pid);
  for (;;) {
    pollfd fds[3] = {{command.stdout_fd, POLLIN, 0},
                     {command.stderr_fd, POLLIN, 0},
                     {pidfd, POLLIN, 0}};
    int timeout = clock.timeout_ms(pidfd >= 0 ? -1 : 20);
    if (pidfd < 0 && timeout > 20) timeout = 20;
    const int ready = poll(fds, 3, timeout);
    if (ready < 0 && errno != EINTR) break;
    clock.sample_if_due();
    if (fds[0].revents) read_available(command.stdout_fd, outcome.stdout_data);
    if (fds[1].revents) read_available(command.stderr_fd, outcome.stderr_data);
    const bool exited = pidfd >= 0 ? fds[2].revents != 0 : has_exited(command.pid);
    if (exited || (command.stdout_fd < 0 && command.stderr_fd < 0)) break;
  }
  if (pidfd >= 0) close(pidfd);
}

void wait_until_exited(pid_t pid) {
  siginfo_t info{};
  while (waitid(P_PID, pid, &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
}

// As wait_until_exited(), sampling as it waits: on the pidfd, or polling the exit.
void wait_sampling(pid_t pid, SampleClock& clock) {
  const int pidfd = open_pidfd(pid);
  for (;;) {
    if (pidfd < 0 && has_exited(pid)) break;
    pollfd exit_fd{pidfd, POLLIN, 0};  // ignored by poll() when -1
    const int ready = poll(&exit_fd, 1, clock.timeout_ms(-1));
    if (ready < 0 && errno != EINTR) break;
    if (exit_fd.revents) break;
    clock.sample_if_due();
  }
  if (pidfd >= 0) close(pidfd);
  wait_until_exited(pid);
}

}  // namespace

bool wait_for_command(LaunchedCommand& command, RunningChild& running, CommandOutcome& outcome,
                      SlotCgroup* sampler) {
  // The outcome object serves command after command: nothing of the last one may remain.
  outcome.wait_status = 0;
  outcome.reap_error = 0;
  outcome.usage = {};
  SampleClock clock(sampler);
  if (command.stdout_fd >= 0) collect_until_exit(command, outcome, clock);
  // Without reaping: the group id stays reserved.
  if (sampler)
    wait_sampling(command.pid, clock);
  else
    wait_until_exited(command.pid);
  drain_without_waiting(command.stdout_fd, outcome.stdout_data);
  drain_without_waiting(command.stderr_fd, outcome.stderr_data);
  running.clear();
  pid_t reaped;
  do reaped = wait4(command.pid, &outcome.wait_status, 0, &outcome.usage);
  while (reaped < 0 && errno == EINTR);
  outcome.exited_ns = monotonic_ns();
  if (reaped == command.pid) return true;
  // ECHILD (someone else reaped it) or EINVAL: no status to report, and none to invent.
  outcome.reap_error = reaped < 0 ? errno : ECHILD;
  outcome.wait_status = 0;
  outcome.usage = {};
  return false;
}

}  // namespace spawnpool::detail
