// How the memory history and the admission policy name a command: a hash of the exact
// command (argv and cwd), a fallback hash that survives a flag change (program and output
// path), and the program's hash for "similar commands in this build". Pure functions,
// safe from any thread. The heuristic is described in docs/architecture.md ("The memory history").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace spawnpool::detail {

/// A command's names. 0 in `fallback` means the command has none (no output path found);
/// `exact` and `program` are never 0. The hashes are stable across processes and builds
/// (the history stores them), so changing how they are made needs a new schema version.
struct CommandKey {
  std::uint64_t exact = 0;     ///< argv and cwd, byte for byte (the environment is left out)
  std::uint64_t fallback = 0;  ///< program and output path (and cwd, if that path is relative)
  std::uint64_t program = 0;   ///< the program's file name
};

/// What the fallback key is made of, for diagnostics and tests.
struct CommandIdentity {
  std::string program;  ///< file name of the program that does the work, e.g. "g++"
  std::string output;   ///< the output path as written in the command; empty: none found
};

/// Finds the program and the output path of `argv`. For `sh -c LINE` (also bash, dash,
/// `-ec`...) the line is split into words as the shell would (quotes, backslashes,
/// `;`/`&&`/`||`/`|` between commands); leading `VAR=value`, `env`, `exec`, `nice`,
/// `time` and `command` are skipped, and so are commands that only set the stage (`cd`,
/// `mkdir`, `echo`...) when another command follows. The output is the operand of the
/// first `-o`, `-oPATH`, `--output=PATH` or `--output PATH` (the working command's
/// first, then any); else, in a shell line, the target of the first stdout redirect
/// (`>`, `>>`, `1>`, `>|`, `&>`). Paths under /dev/ (`-o /dev/null`) do not count.
CommandIdentity identify_command(const std::vector<std::string>& argv);

/// The keys of `argv` run in `cwd`. `cwd` should be the effective directory (the
/// driver's when the command names none), so that the same command keys the same.
CommandKey make_command_key(const std::vector<std::string>& argv, const std::string& cwd);

/// A 64-bit hash of `size` bytes (MurmurHash64A). Stable for a given byte order.
std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed);

}  // namespace spawnpool::detail
