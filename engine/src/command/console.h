// The console as the command layers print to it: a driver message whole (the launcher's
// failures, sh's message after direct exec), a command's captured output as one block
// (the sync layer, stack/sync_layer.h; the launcher's distcc compiles), under one
// process-wide lock so that neither is cut into by the other. A C++ driver's console is
// fds 1 and 2 (or its status line's printer, spawnpool/status.h); a binding whose runtime
// owns the console (the Python package: its buffered streams, the status line's printer)
// hands both writes to it with set_writer(), and its writer keeps its own lock.
// Thread-safe.
#pragma once

#include <string_view>

namespace spawnpool::detail::console {

/// Writes a driver message whole to fd 2, never inside a command's block. A reader that
/// went away (EPIPE) or another write error loses the message, nothing else.
void message(std::string_view text);

/// Writes one command's output as one block: `out` to fd 1, then `err` to fd 2.
void output_block(std::string_view out, std::string_view err);

/// Whether fds 1 and 2 are the same open file (a terminal, `> log 2>&1`): a command
/// captured to be shown as a block is then captured merged (the bytes keep their order).
bool streams_merged();

/// Where message() and output_block() go instead of fds 1 and 2: called without the
/// console lock (the writer keeps its own), from any thread. Null functions: the fds.
struct Writer {
  void (*message)(std::string_view text) = nullptr;
  void (*output_block)(std::string_view out, std::string_view err) = nullptr;
};
/// Set while no command runs: the Python module as it is imported, a C++ driver's
/// status line (spawnpool::StatusLine) as it takes the console and gives it back.
void set_writer(Writer writer);

}  // namespace spawnpool::detail::console
