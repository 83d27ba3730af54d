#include "engine/src/pool/stop_signal.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <initializer_list>

namespace spawnpool::detail {
namespace {

bool is_stop(int sig) { return sig == SIGINT || sig == SIGTERM || sig == SIGHUP; }

int pending_stop_signal() {
  sigset_t stop, old, pending;
  sigemptyset(&stop);
  for (const int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  if (pthread_sigmask(SIG_BLOCK, &stop, &old) != 0) return 0;
  int found = 0;
  if (sigpending(&pending) == 0)
    for (const int sig : {SIGHUP, SIGINT, SIGTERM})  // the lowest number, as Python's watch
      if (!found && sigismember(&pending, sig) == 1) found = sig;
  pthread_sigmask(SIG_SETMASK, &old, nullptr);  // commands started here need it clear
  return found;
}

}  // namespace

int stop_signal_arrived(int wakeup_fd) {
  if (const int sig = pending_stop_signal()) return sig;
  if (wakeup_fd < 0) return 0;
  // The fd is the embedder's: one that is not non-blocking is never read (a read could
  // wait for the next signal).
  const int flags = fcntl(wakeup_fd, F_GETFL);
  if (flags < 0 || !(flags & O_NONBLOCK)) return 0;
  unsigned char bytes[256];
  const ssize_t n = read(wakeup_fd, bytes, sizeof bytes);
  for (ssize_t i = 0; i < n; ++i)
    if (is_stop(bytes[i])) return bytes[i];
  return 0;
}

int StopLatch::check() {
  if (const int sig = seen_.load(std::memory_order_acquire)) return sig;
  if (wakeup_fd_ < 0) return 0;
  std::lock_guard<std::mutex> lock(read_mutex_);
  if (const int sig = seen_.load(std::memory_order_acquire)) return sig;
  const int sig = stop_signal_arrived(wakeup_fd_);
  if (sig) note(sig);
  return seen_.load(std::memory_order_acquire);
}

void StopLatch::note(int sig) {
  if (sig <= 0) return;
  int none = 0;
  seen_.compare_exchange_strong(none, sig, std::memory_order_acq_rel);
}

}  // namespace spawnpool::detail
