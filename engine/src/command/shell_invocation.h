// The one "is this `sh -c LINE`?" predicate, with the one set of shells the engine knows.
// prepare_command() asks it once per command (the launcher, direct exec and the history
// key read its answer from the PreparedCommand); the key also asks it behind wrappers
// (`env X=1 sh -c ...`). Pure functions; no threading concerns.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spawnpool::detail {

/// argv[first...] runs a command line through a shell the engine knows.
struct ShellInvocation {
  std::size_t line_index;  ///< argv[line_index] is the line (first + 2)
  /// The line runs as dash runs it: argv is exactly `[sh or dash, -c, line]`, the shell
  /// named bare or in /bin or /usr/bin (Debian's /bin/sh is dash). Direct exec takes
  /// only these: its PWD, status and messages are dash's (direct_exec.h).
  bool as_dash;
};

/// Whether `name` (a file name, "bash") is one of the shells: sh, dash, bash, ksh, zsh.
/// Their word syntax is the same for what the engine reads of a line (the program, -c,
/// -o, redirections), and a launcher inserted before the program works in each.
bool is_known_shell(std::string_view name);

/// The shell invocation at argv[first]: a known shell, then `-c` or a cluster of
/// single-letter options that holds c (`-ec`, `-xc`), then the line (operands after it
/// are the line's $0, $1...). Nothing otherwise.
std::optional<ShellInvocation> shell_invocation(const std::vector<std::string>& argv,
                                                std::size_t first = 0);

/// The file name of `path` ("gcc" of "/usr/bin/gcc").
std::string_view file_name(std::string_view path);

}  // namespace spawnpool::detail
