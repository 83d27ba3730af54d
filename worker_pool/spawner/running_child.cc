#include "worker_pool/spawner/running_child.h"

#include <signal.h>

#include "worker_pool/spawner/descendants.h"

namespace spawnpool::detail {
namespace {

// How long a SIGKILL through the cgroup may wait for the slot to empty. Only a process
// stuck in the kernel (D state) takes this long; the launch waits meanwhile.
constexpr std::chrono::milliseconds kKillAllTimeout{2000};

}  // namespace

// The group first; then whatever of the command left its group or session (setsid, a
// double fork), which the slot's cgroup still holds, or else the spawner's descendants
// (inherited as their subreaper). SIGKILL waits until none is left, so that a cancel or
// close leaves nothing running.
void RunningChild::signal_locked(int sig) {
  kill(-pid_, sig);
  if (slot_cgroup_ != nullptr && slot_cgroup_->is_open()) {
    if (sig == SIGKILL)
      slot_cgroup_->kill_all(kKillAllTimeout);
    else
      slot_cgroup_->signal_all(sig);
  } else if (reach_descendants_) {
    if (sig == SIGKILL)
      kill_descendants(pid_, kKillAllTimeout);
    else
      signal_descendants(sig, pid_);
  }
}

void RunningChild::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  pid_ = 0;
}

void RunningChild::signal_group(int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pid_ > 0) signal_locked(sig);
}

void RunningChild::signal_group(int sig, std::uint32_t number) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Request numbers wrap: "after" is a positive distance in 32-bit serial arithmetic.
  if (static_cast<std::int32_t>(number - number_) > 0) {
    pending_number_ = number;
    pending_signal_ = sig;
  } else if (pid_ > 0 && number_ == number) {
    signal_locked(sig);
  }
}

void RunningChild::stop(int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pid_ > 0)
    signal_locked(sig);
  else if (reach_descendants_ && sig == SIGKILL)
    kill_descendants(0, kKillAllTimeout);  // a slot cgroup's are its clean-up's
  stopped_ = true;
}

}  // namespace spawnpool::detail
