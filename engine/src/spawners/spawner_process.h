// Launching one spawner process from the driver: posix_spawn of the small
// spawnpool-spawner executable (never a fork of the driver, whose size would then
// matter), with the segment on fd 3 and a lifeline socket on fd 4. Boost.Process v2 was
// evaluated for this and not adopted (docs/architecture.md, "Choices and why").
// Thread-compatible: the supervisor calls these under the slot's lock (send_on_lifeline()
// under the lifeline's).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "worker_pool/protocol/protocol.h"

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

/// How a message on a lifeline went: sent; not sent because the socket is full (send it
/// again once poll() says POLLOUT: a cancel must not be lost); or not sent because the
/// spawner is gone (nothing is left to signal).
enum class LifelineSend { kSent, kWouldBlock, kGone };

/// Sends one message (protocol::CancelMessage) on `lifeline_fd`. Never blocks, never
/// SIGPIPE.
LifelineSend send_on_lifeline(int lifeline_fd, const protocol::CancelMessage& message);

/// Tells the spawner that the lifeline's EOF to come is the pool closing, not the
/// driver dying (protocol::kGoodbye): it then leaves the pool's cgroups to the driver.
/// Waits up to a second for room on a full lifeline.
void say_goodbye(const SpawnerProcess& spawner);

}  // namespace spawnpool::detail
