// Whether the driver was told to stop (SIGINT, SIGTERM or SIGHUP) before its own handler
// has run: PoolOptions::stop_signal_fd. Asked right before a dispatched command starts.
// PoolCore also looks at the stop signals its spawners took (SlotControl::stop_signal):
// a thread of the driver can have the signal off the pending set and not yet in the
// pipe for as long as it waits for a CPU (seen under load: 2.4 ms, two commands started).
#pragma once

#include <atomic>
#include <mutex>

namespace spawnpool::detail {

/// The stop signal that arrived, or 0: one pending for the process (sigpending() with
/// the three blocked for a moment in this thread: a process-wide signal stays pending
/// until a thread takes it), else one whose number is in `wakeup_fd` (non-blocking;
/// bytes of other signals are dropped). A byte read here is gone for every other
/// caller: a pool asks through StopLatch.
int stop_signal_arrived(int wakeup_fd);

/// The one stop a pool was told of, the same for every thread that asks. Without it,
/// two commands dispatched at once (two slots freed by the same Ctrl-C) raced: the first
/// thread read the signal's byte from the pipe, and the second, asking a moment later,
/// found the pipe empty and the signal already taken, and started its command.
/// Thread-safe: any thread.
class StopLatch {
 public:
  /// `wakeup_fd` < 0: only note() stops.
  explicit StopLatch(int wakeup_fd) : wakeup_fd_(wakeup_fd) {}

  /// The stop seen so far: note()'s, or one an earlier check() found; else what
  /// stop_signal_arrived(wakeup_fd) finds now, kept. 0: none.
  int check();
  /// The pool was interrupted by `sig` (Pool::interrupt): every later check() is `sig`.
  /// The first stop stays; `sig` <= 0 is ignored.
  void note(int sig);

 private:
  const int wakeup_fd_;
  std::atomic<int> seen_{0};
  // Held while one caller reads the pipe and keeps what it read: no caller finds the
  // pipe emptied by a read whose signal is not kept yet.
  std::mutex read_mutex_;
};

}  // namespace spawnpool::detail
