// Futex wait/wake on a 32-bit word in shared memory: the doorbell between driver and
// spawners. Written by hand because Boost.Interprocess offers only process-shared
// mutexes and condition variables, which a peer dying mid-update leaves locked.
// Thread-safe; every call may be made from any thread of any process mapping the word.
#pragma once

#include <atomic>
#include <cstdint>

namespace spawnpool::detail {

/// Sleeps while `word` holds `expected`, at most `timeout_ms` (< 0: no limit).
/// Returns on a wake, a change, a signal, the timeout, or spuriously: callers re-check.
void futex_wait(std::atomic<std::uint32_t>& word, std::uint32_t expected, int timeout_ms);

/// Wakes every waiter on `word` in any process.
void futex_wake_all(std::atomic<std::uint32_t>& word);

}  // namespace spawnpool::detail
