// The command a spawner is running, as seen by the thread that forwards signals to it.
// Thread-safe: the main thread sets and clears it, the watch thread signals through it.
// The pid is cleared before the child is reaped, so a signal never reaches a recycled
// process group: until the reap, the zombie leader keeps its group id reserved. With a
// slot cgroup, every signal also goes to everything in the slot (what left the group);
// without one, a spawner that reaches its descendants (descendants.h: it is their
// subreaper) sends it to every one of them outside the command's group.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <cstdint>
#include <mutex>

#include "worker_pool/cgroup/cgroup_slot.h"

namespace spawnpool::detail {

class RunningChild {
 public:
  /// `slot_cgroup`, if set (and open), must outlive this object. `reach_descendants`:
  /// this process is its descendants' subreaper, and signals reach them all.
  explicit RunningChild(const SlotCgroup* slot_cgroup = nullptr, bool reach_descendants = false)
      : slot_cgroup_(slot_cgroup), reach_descendants_(reach_descendants) {}
  bool reaches_descendants() const { return reach_descendants_; }

  /// Starts a command through `start` (returns its pid, or -1) with the lock held and
  /// records the pid as command number `number`: a signal sent meanwhile (a cancel,
  /// Ctrl-C, the driver's death) waits for the launch and reaches the new command
  /// instead of missing it. Returns false, starting nothing, once stop() was called.
  template <typename Start>
  bool launch(std::uint32_t number, Start&& start) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopped_) return false;
    const pid_t pid = start();
    if (pid > 0) {
      pid_ = pid;
      number_ = number;
      if (pending_number_ == number) signal_locked(pending_signal_);
    }
    return true;
  }
  void clear();
  /// Sends `sig` to the running command's process group (and its slot); no-op when none
  /// runs.
  void signal_group(int sig);
  /// As signal_group(), only if the running command is number `number`: a cancel meant
  /// for a command that has ended never reaches the next one, and one for a command not
  /// launched yet is delivered by launch().
  void signal_group(int sig, std::uint32_t number);
  /// signal_group(), then refuses every later launch: the driver is gone, and a command
  /// started now would outlive the spawner. Reaching descendants, a SIGKILL also ends
  /// what earlier commands left behind when no command runs.
  void stop(int sig);

 private:
  void signal_locked(int sig);

  const SlotCgroup* const slot_cgroup_;
  const bool reach_descendants_;
  std::mutex mutex_;
  pid_t pid_ = 0;            // 0 when no command runs
  std::uint32_t number_ = 0; // which request pid_ serves (the driver counts from 1)
  std::uint32_t pending_number_ = 0;  // a request cancelled before its launch, or 0
  int pending_signal_ = 0;
  bool stopped_ = false;
};

}  // namespace spawnpool::detail
