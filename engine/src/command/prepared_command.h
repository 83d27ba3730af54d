// A command as the engine's layers see it: made once, at the door (the stack's entry, or
// Pool::submit for a bare embedder), by prepare_command() (prepare_command.h), and only
// read below it. The defaults (cwd, environment), the shell line, its words and program,
// the compile classification are decided there and nowhere else (docs/architecture.md,
// "The life of a command"). A plain value; no threading concerns.
//
// The fields are the contract between the layers: a layer may change `command` (what
// runs) and the fields its own comment gives it (the launcher layer: launched, local,
// launcher_words), never re-derive another from `command`.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/src/history/history_store_key.h"
#include "spawnpool/command.h"

namespace spawnpool::detail {

struct PreparedCommand {
  /// What runs: cwd absolute (or "" when the driver's own cannot be read), env complete
  /// (always set), the output mode the caller asked for. Layers that change what runs
  /// (the launcher, direct exec, output sync) change this and keep the rest true.
  Command command;
  /// The caller's argv runs a line through a shell the engine knows (shell_invocation(),
  /// shell_invocation.h: sh, dash, bash, ksh, zsh with -c); the line is its argv[2].
  bool shell_line = false;
  /// The caller's command as one line, for messages, the trace and the status line: the
  /// -c line, or argv joined with spaces. Unchanged by the layers.
  std::string line;
  /// The line's words when it is a dash line (`[sh, -c, line]`: ShellInvocation::as_dash)
  /// without shell syntax (simple_command(), shell_words.h): direct exec runs them.
  /// Empty otherwise.
  std::vector<std::string> simple_words;
  /// The program that does the work, as written (behind a wrapper or a launcher: the
  /// compiler it runs), and its file name ("g++"); empty when none was found.
  std::string program;
  std::string program_name;
  /// The file it writes, as written (`-o`, or in a shell line the first stdout redirect);
  /// empty: none found. With program_name, the history's fallback key.
  std::string output;
  bool compile = false;    ///< a C/C++ compile, as the compile classifier says
  /// Where the compiler's word starts in `line`, for a compile that is a shell line (a
  /// launcher goes there); std::string::npos otherwise.
  std::size_t compiler_offset = std::string::npos;
  bool launched = false;   ///< rewritten to run through the compiler launcher
  /// Counts against the local slots (PoolOptions::local_slots): every command that does
  /// not go through the launcher. Set by the launcher layer.
  bool local = true;
  /// Set by the launcher layer when it launches a line that has simple_words: the
  /// launcher's words (its resolved path, its arguments). Direct exec runs them before
  /// simple_words; `command` holds the line with the launcher put in for sh.
  std::vector<std::string> launcher_words;
  /// The history's names for it (make_command_key(), command_key.h): set where the pool
  /// takes the command (PoolCore::submit), and only when the pool keeps keys (a memory
  /// budget): the exact key from what runs then, the others from program_name and output.
  CommandKey key;
  /// Called by the pool while it waits for the command, as Pool::wait's `tick`
  /// (spawnpool::WaitTick): set by a binding whose runtime must run its own signal
  /// handlers meanwhile (the Python module, on the main thread), for the call's length.
  /// Null: none.
  const std::function<int()>* wait_tick = nullptr;
};

}  // namespace spawnpool::detail
