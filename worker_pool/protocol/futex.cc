#include "worker_pool/protocol/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

namespace spawnpool::detail {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t) &&
                  std::atomic<std::uint32_t>::is_always_lock_free,
              "futex words must be plain lock-free 32-bit integers");

// Shared (not FUTEX_PRIVATE) operations: the word lives in a MAP_SHARED segment
// mapped by several processes.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, int timeout_ms) {
  timespec timeout{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT, expected,
          timeout_ms < 0 ? nullptr : &timeout, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>& word) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE, INT_MAX, nullptr,
          nullptr, 0);
}

}  // namespace spawnpool::detail
