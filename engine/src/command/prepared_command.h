// A command as the engine's layers see it: made once, at the door (the stack's entry, or
// Pool::submit for a bare embedder), by prepare_command(), and only read below it. The
// defaults (cwd, environment), the shell line, its words and program, the compile
// classification and the history key are decided there and nowhere else
// (docs/architecture.md, "The life of a command"). A plain value; no threading concerns.
//
// Issue 19 skeleton: the fields are the contract between the layers; the helpers that
// implement prepare_command() (engine/src/command/) may add fields, never re-derive one
// in a layer.
#pragma once

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
  /// argv is `[sh, -c, line]` for a POSIX sh the engine knows (is_posix_sh_line()).
  bool shell_line = false;
  /// The caller's command as one line, for messages, the trace and the status line: the
  /// -c line, or argv joined with spaces. Unchanged by the layers.
  std::string line;
  /// The line's words when it has no shell syntax (direct exec runs them), else empty.
  std::vector<std::string> simple_words;
  /// The program that does the work, as written (behind a launcher: the compiler it
  /// runs), and its file name ("g++").
  std::string program;
  std::string program_name;
  bool compile = false;    ///< a C/C++ compile, as the compile classifier says
  bool launched = false;   ///< rewritten to run through the compiler launcher
  /// Counts against the local slots (PoolOptions::local_slots): every command that does
  /// not go through the launcher. Set by the launcher layer.
  bool local = true;
  /// The history's names for it (argv and cwd, program and output, program), made from
  /// the fields above, not from a parse of its own.
  CommandKey key;
};

}  // namespace spawnpool::detail
