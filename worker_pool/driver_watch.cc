#include "worker_pool/driver_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace spawnpool::detail {
namespace {

sigset_t forwarded_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

// Returns false once the driver is gone. The driver sends a 0 before each request, so
// `announced` counts requests as the main thread does, and a signal byte read now is
// for the command announced last, however late this thread gets to read it.
bool handle_lifeline(int lifeline_fd, RunningChild& running, std::uint64_t& announced) {
  unsigned char signals[16];
  const ssize_t n = recv(lifeline_fd, signals, sizeof signals, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  for (ssize_t i = 0; i < n; ++i) {
    if (signals[i] == 0)
      ++announced;
    else if (signals[i] < NSIG)
      running.signal_group(signals[i], announced);
  }
  return true;
}

void watch(int lifeline_fd, int signal_fd, RunningChild& running) {
  std::uint64_t announced = 0;
  for (;;) {
    pollfd fds[2] = {{lifeline_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;  // EINTR
    if (fds[0].revents && !handle_lifeline(lifeline_fd, running, announced)) {
      running.stop(SIGKILL);  // no launch may slip in before _exit
      _exit(0);
    }
    signalfd_siginfo info;
    if (fds[1].revents && read(signal_fd, &info, sizeof info) == sizeof info)
      running.signal_group(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace

void block_forwarded_signals() {
  const sigset_t set = forwarded_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::thread start_driver_watch(int lifeline_fd, RunningChild& running) {
  const sigset_t set = forwarded_signals();
  const int signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
  return std::thread(watch, lifeline_fd, signal_fd, std::ref(running));
}

}  // namespace spawnpool::detail
