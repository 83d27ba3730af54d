// The spawner's second thread: it watches the lifeline socket to the driver and the
// terminal signals, and acts on the running command's process group.
//  - a CancelMessage {request number, signal} from the driver: send the signal to
//    that request's command, now or, if it has not started yet, when it starts;
//  - EOF or error on the lifeline: the driver is gone, so SIGKILL the command's group
//    (with a slot cgroup: everything in the slot) and exit at once (nobody is left to
//    report to). Without the driver's goodbye (protocol::kGoodbye) first, the driver
//    died: the spawners then remove the pool's cgroups themselves;
//  - SIGINT/SIGTERM/SIGHUP to the spawner (it shares the driver's process group, so a
//    Ctrl-C reaches it): note it in the slot's SlotControl::stop_signal, then forward it
//    to the command, keep serving.
#pragma once

#include <atomic>
#include <cstdint>

#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/spawner/running_child.h"

namespace spawnpool::detail {

/// Blocks SIGINT/SIGTERM/SIGHUP in the calling thread (call before starting any other
/// thread) so they are read from a signalfd by the watch thread. False on failure.
bool block_forwarded_signals();

/// Starts the watch thread, detached; it runs until the process exits. False, with
/// errno set, when its signalfd or the thread cannot be created. `slot_cgroup` (open or
/// not) and `stop_signal` (the slot's SlotControl::stop_signal) must live as long as the
/// process.
bool start_driver_watch(int lifeline_fd, RunningChild& running, const SlotCgroup& slot_cgroup,
                        std::atomic<std::int32_t>& stop_signal);

}  // namespace spawnpool::detail
