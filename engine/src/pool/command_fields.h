// What the engine decides about a command before it is sent, in one place: the working
// directory (relative to the driver's at submit time, as Popen), the environment (the
// driver's at submit time when the command has none), the request flags for its output
// mode. Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "spawnpool/command.h"

namespace spawnpool::detail {

/// The command's cwd as the spawner is to enter it: absolute, or "" (the spawner's own,
/// which is the driver's at pool start) when the driver's cannot be read.
std::string working_directory(const std::string& cwd);

/// The driver's environment now, as "NAME=value" entries.
std::vector<std::string> current_environment();

/// protocol::RequestFlags for `output`.
std::uint32_t request_flags(OutputMode output);

}  // namespace spawnpool::detail
