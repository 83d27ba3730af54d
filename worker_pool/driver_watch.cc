#include "worker_pool/driver_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <thread>

#include "worker_pool/protocol/protocol.h"

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

// Returns false once the driver is gone. Each message names the request it is for, so
// a cancel read late never reaches a later command (see RunningChild).
bool handle_lifeline(int lifeline_fd, RunningChild& running) {
  protocol::CancelMessage cancel;
  const ssize_t n = recv(lifeline_fd, &cancel, sizeof cancel, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  if (n == sizeof cancel && cancel.signal > 0 && cancel.signal < NSIG)
    running.signal_group(cancel.signal, cancel.number);
  return true;
}

void watch(int lifeline_fd, int signal_fd, RunningChild& running) {
  for (;;) {
    pollfd fds[2] = {{lifeline_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) continue;  // EINTR
    if (fds[0].revents && !handle_lifeline(lifeline_fd, running)) {
      running.stop(SIGKILL);  // no launch may slip in before _exit
      _exit(0);
    }
    signalfd_siginfo info;
    if (fds[1].revents && read(signal_fd, &info, sizeof info) == sizeof info)
      running.signal_group(static_cast<int>(info.ssi_signo));
  }
}

}  // namespace

bool block_forwarded_signals() {
  const sigset_t set = forwarded_signals();
  const int error = pthread_sigmask(SIG_BLOCK, &set, nullptr);
  if (error != 0) errno = error;
  return error == 0;
}

// Without the signalfd the forwarded signals would stay blocked and never be read: a
// spawner that cannot watch them must not serve.
bool start_driver_watch(int lifeline_fd, RunningChild& running) {
  const sigset_t set = forwarded_signals();
  const int signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
  if (signal_fd < 0) return false;
  try {
    std::thread(watch, lifeline_fd, signal_fd, std::ref(running)).detach();
  } catch (const std::system_error& e) {
    close(signal_fd);
    errno = e.code().value();
    return false;
  }
  return true;
}

}  // namespace spawnpool::detail
