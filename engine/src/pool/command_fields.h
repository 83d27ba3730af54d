// The request flags a command's output mode asks the spawner for. The cwd and environment
// defaults are the door's (engine/src/command/prepare_command.h). Pure function:
// thread-safe.
#pragma once

#include <cstdint>

#include "spawnpool/command.h"

namespace spawnpool::detail {

/// protocol::RequestFlags for `output`.
std::uint32_t request_flags(OutputMode output);

}  // namespace spawnpool::detail
