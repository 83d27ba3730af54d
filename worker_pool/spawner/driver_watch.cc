#include "worker_pool/spawner/driver_watch.h"

#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>
#include <thread>

#include "worker_pool/cgroup/cgroup_sweep.h"
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
// a cancel read late never reaches a later command (see RunningChild); kGoodbye sets
// `goodbye`.
bool handle_lifeline(int lifeline_fd, RunningChild& running, bool& goodbye) {
  protocol::CancelMessage cancel;
  const ssize_t n = recv(lifeline_fd, &cancel, sizeof cancel, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
  if (n <= 0) return false;
  if (n != sizeof cancel) return true;
  if (cancel.number == protocol::kGoodbye.number && cancel.signal == protocol::kGoodbye.signal)
    goodbye = true;
  else if (cancel.signal > 0 && cancel.signal < NSIG)
    running.signal_group(cancel.signal, cancel.number);
  return true;
}

// The driver is gone: nothing of ours may outlive it. A driver that said goodbye removes
// the pool's cgroups itself (after reaping us); one that died left that to its spawners.
[[noreturn]] void end_with_driver(RunningChild& running, const SlotCgroup& slot_cgroup,
                                  bool goodbye) {
  running.stop(SIGKILL);  // no launch may slip in before _exit
  std::string why;
  if (!clean_up_slot_cgroups(slot_cgroup, !goodbye, why) && !why.empty()) {
    const std::string line = "spawnpool-spawner: " + why + "\n";
    (void)!write(2, line.data(), line.size());
  }
  _exit(0);
}

// Loop structure: wait for the lifeline or a forwarded signal, handle what is ready. A
// poll() that fails other than by EINTR (ENOMEM) is tried again 50 ms later, never at
// once: spinning would take a CPU from the build for as long as the failure lasts.
void watch(int lifeline_fd, int signal_fd, RunningChild& running, const SlotCgroup& slot_cgroup,
           std::atomic<std::int32_t>& stop_signal) {
  bool goodbye = false;
  for (;;) {
    pollfd fds[2] = {{lifeline_fd, POLLIN, 0}, {signal_fd, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno != EINTR) {
        const timespec pause{0, 50 * 1000 * 1000};
        nanosleep(&pause, nullptr);
      }
      continue;
    }
    if (fds[0].revents && !handle_lifeline(lifeline_fd, running, goodbye))
      end_with_driver(running, slot_cgroup, goodbye);
    signalfd_siginfo info;
    if (fds[1].revents && read(signal_fd, &info, sizeof info) == sizeof info) {
      const int sig = static_cast<int>(info.ssi_signo);
      std::int32_t none = 0;  // the first stays; noted before the command can end of it
      stop_signal.compare_exchange_strong(none, sig, std::memory_order_release);
      running.signal_group(sig);
    }
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
bool start_driver_watch(int lifeline_fd, RunningChild& running, const SlotCgroup& slot_cgroup,
                        std::atomic<std::int32_t>& stop_signal) {
  const sigset_t set = forwarded_signals();
  const int signal_fd = signalfd(-1, &set, SFD_CLOEXEC);
  if (signal_fd < 0) return false;
  try {
    std::thread(watch, lifeline_fd, signal_fd, std::ref(running), std::cref(slot_cgroup),
                std::ref(stop_signal))
        .detach();
  } catch (const std::system_error& e) {
    close(signal_fd);
    errno = e.code().value();
    return false;
  }
  return true;
}

}  // namespace spawnpool::detail
