// Finding a command's program as execvp() would: PATH from the command's own environment
// (as Popen does, not the spawner's), relative entries and the program seen from the
// command's cwd. Pure but for stat()/faccessat(): thread-safe; the spawner calls it from
// its main thread, before the child exists.
#pragma once

#include <string>

namespace spawnpool::detail {

/// The path to execute for `name`: `name` itself when it holds a '/', else the first
/// PATH entry (from `envp`; /bin:/usr/bin without one) holding a regular file the caller
/// may execute. An empty entry is the cwd. `cwd` (null: the caller's) is where relative
/// paths are looked at from; the result stays relative, as the child will exec it after
/// its chdir. "" when none is found, with `error_number` ENOENT, or EACCES when a match
/// was found that cannot be executed (execvp's rule: the search goes on past it).
std::string search_path(const char* name, char* const* envp, const char* cwd,
                        int& error_number);

}  // namespace spawnpool::detail
