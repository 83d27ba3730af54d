#include "worker_pool/running_child.h"

#include <signal.h>

namespace spawnpool::detail {

void RunningChild::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  pid_ = 0;
}

void RunningChild::signal_group(int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pid_ > 0) kill(-pid_, sig);
}

void RunningChild::signal_group(int sig, std::uint32_t number) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Request numbers wrap: "after" is a positive distance in 32-bit serial arithmetic.
  if (static_cast<std::int32_t>(number - number_) > 0) {
    pending_number_ = number;
    pending_signal_ = sig;
  } else if (pid_ > 0 && number_ == number) {
    kill(-pid_, sig);
  }
}

void RunningChild::stop(int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pid_ > 0) kill(-pid_, sig);
  stopped_ = true;
}

}  // namespace spawnpool::detail
