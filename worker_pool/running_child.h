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
  void clear();
  /// Sends `sig` to the running command's process group; no-op when none runs.
  void signal_group(int sig);

 private:
  std::mutex mutex_;
  pid_t pid_ = 0;  // 0 when no command runs
};

}  // namespace spawnpool::detail
