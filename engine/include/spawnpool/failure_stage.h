// Why a command has no exit status: one enum for the public Result and for the
// shared-memory protocol. A spawner's reply carries kNone to kSpawner (the values cross
// the process boundary as 32-bit integers); the engine alone decides the last two. A
// plain enum: no threading concerns.
#pragma once

#include <cstdint>

namespace spawnpool {

enum class FailureStage : std::int32_t {
  kNone = 0,          ///< the command ran
  kRequest = 1,       ///< refused before anything ran (E2BIG, EINVAL for a NUL byte)
  kChdir = 2,         ///< the working directory could not be entered
  kExec = 3,          ///< the program could not be executed (ENOENT, EACCES, ENOEXEC...)
  kSpawner = 4,       ///< the spawner failed to serve it: its own set-up (pipes, fds...), or
                      ///< a malformed reply (EPROTO; that spawner is then replaced)
  kSpawnerDied = 5,   ///< the spawner died under it, or none could be started for it
  kPoolClosed = 6,    ///< the pool was closed before or while it ran
};

/// The last stage a spawner may put in a reply; the later ones are the engine's own.
inline constexpr FailureStage kLastSpawnerStage = FailureStage::kSpawner;

/// "request", "chdir", "exec", "spawner", "spawner_died", "pool_closed"; "" for kNone.
const char* stage_name(FailureStage stage);

}  // namespace spawnpool
