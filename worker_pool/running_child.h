// The command a spawner is running, as seen by the thread that forwards signals to it.
// Thread-safe: the main thread sets and clears it, the watch thread signals through it.
// The pid is cleared before the child is reaped, so a signal never reaches a recycled
// process group: until the reap, the zombie leader keeps its group id reserved.
#pragma once

#include <sys/types.h>

#include <mutex>

namespace spawnpool::detail {

class RunningChild {
 public:
  void set(pid_t pid);
  /// Starts a command through `start` (returns its pid, or -1) with the lock held and
  /// records the pid: a signal sent meanwhile (a cancel, Ctrl-C, the driver's death)
  /// waits for the launch and reaches the new command instead of missing it.
  template <typename Start>
  void launch(Start&& start) {
    std::lock_guard<std::mutex> lock(mutex_);
    const pid_t pid = start();
    if (pid > 0) pid_ = pid;
  }
  void clear();
  /// Sends `sig` to the running command's process group; no-op when none runs.
  void signal_group(int sig);

 private:
  std::mutex mutex_;
  pid_t pid_ = 0;  // 0 when no command runs
};

}  // namespace spawnpool::detail
