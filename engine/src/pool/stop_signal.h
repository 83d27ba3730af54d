// Whether the driver was told to stop (SIGINT, SIGTERM or SIGHUP) before its own handler
// has run: PoolOptions::stop_signal_fd. Asked right before a dispatched command starts.
// Thread-safe: any thread; a byte read by one caller is seen by that caller only (it
// interrupts the pool, which every later command sees).
#pragma once

namespace spawnpool::detail {

/// The stop signal that arrived, or 0: one pending for the process (sigpending() with
/// the three blocked for a moment in this thread: a process-wide signal stays pending
/// until a thread takes it), else one whose number is in `wakeup_fd` (non-blocking;
/// bytes of other signals are dropped).
int stop_signal_arrived(int wakeup_fd);

}  // namespace spawnpool::detail
