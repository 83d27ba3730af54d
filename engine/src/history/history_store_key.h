// How the memory history and the admission policy name a command: a hash of the exact
// command (argv and cwd), a fallback hash that survives a flag change (program and output
// path), and the program's hash for "similar commands in this build". What the program
// and the output are is the command's business (engine/src/command/command_identity.h);
// this file only hashes them, with the seeds the stored histories were written with.
// Pure functions, safe from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace spawnpool::detail {

/// A command's names. 0 in `fallback` means the command has none (no output path found);
/// `exact` and `program` are never 0. The hashes are stable across processes and builds
/// (the history stores them), so changing how they are made needs a new schema version.
struct CommandKey {
  std::uint64_t exact = 0;     ///< argv and cwd, byte for byte (the environment is left out)
  std::uint64_t fallback = 0;  ///< program and output path (and cwd, if that path is relative)
  std::uint64_t program = 0;   ///< the program's file name
  /// The output file's path alone (hash_output_path; 0: none found): what a driver that
  /// knows which files it will build, not which commands, can name (issue 18's ETA).
  std::uint64_t output = 0;
};

/// The keys of `argv` run in `cwd`, whose program's file name is `program_name` ("g++")
/// and whose output path, as written, is `output` (empty: none). `cwd` should be the
/// effective directory (the driver's when the command names none), so that the same
/// command keys the same.
CommandKey hash_command_key(const std::vector<std::string>& argv, const std::string& cwd,
                            std::string_view program_name, std::string_view output);

/// The key of the output file `path`, relative to `cwd` unless it is absolute: the
/// path as `cwd/path` ("./" prefixes dropped), so that a command's `-o obj/a.o` run in
/// /top and a driver's /top/obj/a.o name the same file. Never 0.
std::uint64_t hash_output_path(std::string_view path, std::string_view cwd = {});

/// A 64-bit hash of `size` bytes (MurmurHash64A). Stable for a given byte order.
std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed);

}  // namespace spawnpool::detail
