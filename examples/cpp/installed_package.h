// What both examples take alike from the installed spawnpool package: its spawner, and a
// build's command as `sh -c LINE`. Header-only, for the examples.
#pragma once

#include <spawnpool/pool.h>

#include <cstdlib>
#include <string>

namespace example {

/// The installed package knows where its spawner is: its spawnpoolConfig.cmake defines
/// SPAWNPOOL_INSTALLED_SPAWNER, since the prefix may have moved since spawnpool was
/// configured (the engine's built-in default). $SPAWNPOOL_SPAWNER still wins, as it does
/// over the built-in default.
inline void use_installed_spawner(spawnpool::PoolOptions& options) {
#ifdef SPAWNPOOL_INSTALLED_SPAWNER
  if (std::getenv("SPAWNPOOL_SPAWNER") == nullptr) options.spawner_path = SPAWNPOOL_INSTALLED_SPAWNER;
#else
  (void)options;
#endif
}

/// A build's command as `sh -c LINE`, as a build tool's shell actions are (a session's
/// direct exec runs the simple ones without the shell).
inline spawnpool::Command shell_command(const std::string& line) {
  spawnpool::Command command;
  command.argv = {"/bin/sh", "-c", line};
  return command;
}

}  // namespace example
