// What a command is, for the memory history and for messages: the program that does the
// work (past assignments, wrappers such as `env` or `nice`, and compiler launchers such
// as `ccache` or `distcc`) and the file it writes. prepare_command() finds it once; the
// heuristic is described in docs/architecture.md ("The memory history"). Pure functions.
#pragma once

#include <string>
#include <vector>

#include "engine/src/command/shell_words.h"

namespace spawnpool::detail {

struct CommandIdentity {
  std::string program;  ///< the program's word as written ("/usr/bin/g++"); empty: none
  std::string output;   ///< the output path as written in the command; empty: none found
};

/// The identity of argv. For `sh -c LINE` (any known shell, also behind wrappers) the
/// line is read with identify_line().
CommandIdentity identify_command(const std::vector<std::string>& argv);

/// The identity of a shell line, from its tokens: among its simple commands (`;`, `&&`,
/// `||`, `|` between them) the first whose program does more than set the stage (`cd`,
/// `mkdir`, `echo`...; the first one if all do). The output is the operand of the first
/// `-o`, `-oPATH`, `--output=PATH` or `--output PATH` (that command's first, then any);
/// else the target of the first stdout redirect (`>`, `>>`, `1>`, `>|`, `&>`). Paths
/// under /dev/ (`-o /dev/null`) do not count.
CommandIdentity identify_line(const std::vector<ShellToken>& tokens);

/// Whether `name` (a file name) is a compiler launcher: ccache, distcc, icecc, sccache.
/// The identity looks through them; a compiler in a directory of that name is one's
/// masquerade link (/usr/lib/ccache/gcc), which the compile classifier leaves alone.
bool is_compiler_launcher(std::string_view name);

}  // namespace spawnpool::detail
