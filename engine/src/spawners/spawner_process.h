// Launching one spawner process from the driver: posix_spawn of the small
// spawnpool-spawner executable (never a fork of the driver, whose size would then
// matter), with the segment on fd 3 and a lifeline socket on fd 4. Boost.Process v2 was
// evaluated for this and not adopted (docs/architecture.md, "Choices and why").
// Thread-compatible: the supervisor calls these under its lock.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace spawnpool::detail {

struct SpawnerProcess {
  pid_t pid = -1;
  int pidfd = -1;        // -1 where pidfd_open is unavailable (kernel < 5.3)
  // The driver's end of the lifeline: each CancelMessage (protocol.h) asks the spawner to
  // signal a request's command; closing it ends the spawner.
  int lifeline_fd = -1;
};

/// Throws std::system_error when the spawner cannot be started. `cgroup_argument`, when
/// not empty, tells the spawner its slot's cgroup (encode_slot_cgroup()).
SpawnerProcess launch_spawner(const std::string& path, int segment_fd, std::uint32_t slot,
                              const std::string& cgroup_argument);

/// Closes the lifeline (the spawner then kills its command and exits) and the pidfd.
/// The process is not reaped here.
void release_spawner(SpawnerProcess& spawner);

/// Asks the spawner to send `sig` to the command of request number `request` (now, or
/// when it starts); never blocks, never SIGPIPE.
void signal_spawner_command(const SpawnerProcess& spawner, std::uint32_t request, int sig);

/// Tells the spawner that the lifeline's EOF to come is the pool closing, not the
/// driver dying (protocol::kGoodbye): it then leaves the pool's cgroups to the driver.
void say_goodbye(const SpawnerProcess& spawner);

}  // namespace spawnpool::detail
