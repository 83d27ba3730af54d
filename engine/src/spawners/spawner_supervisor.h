// The spawners' lifetime on the driver side: start and attach, death (a monitor thread
// polls every spawner's pidfd; with per-slot cgroups it then empties the slot), a
// replacement when a submitter finds its slot's spawner dead, close (a goodbye on each
// lifeline first). Threading: thread-safe. One mutex guards every spawner record; once
// start() has returned, only the monitor thread reaps or replaces a spawner (close()
// stops it first and then ends the rest itself).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "worker_pool/cgroup/cgroup_tree.h"
#include "engine/src/spawners/segment.h"
#include "engine/src/spawners/slot_channel.h"
#include "engine/src/spawners/spawner_process.h"
#include "spawnpool/failure_stage.h"

namespace spawnpool::detail {

/// Why a slot has no spawner: kSpawnerDied (how it ended, or why none could be started)
/// or kPoolClosed.
struct SpawnerLoss {
  FailureStage stage = FailureStage::kSpawnerDied;
  std::string description;
};

class SpawnerSupervisor {
 public:
  /// `channels` (one per slot of `segment`) and `cgroups` (null: none) must outlive the
  /// supervisor. `spawner_arguments` holds each slot's cgroup argument for its spawners
  /// (empty: no cgroups).
  SpawnerSupervisor(std::string spawner_path, std::chrono::milliseconds start_timeout,
                    Segment& segment, std::vector<std::unique_ptr<SlotChannel>>& channels,
                    std::vector<std::string> spawner_arguments, const CgroupTree* cgroups);
  ~SpawnerSupervisor();  ///< close()
  SpawnerSupervisor(const SpawnerSupervisor&) = delete;
  SpawnerSupervisor& operator=(const SpawnerSupervisor&) = delete;

  /// Launches every spawner, waits until each has attached and starts the monitor. Throws std::system_error, leaving nothing running.
  void start();
  /// Makes sure `slot` has a live spawner: if it died, asks the monitor for a
  /// replacement and waits for it. False, with why in `loss`, when none serves.
  bool ensure_alive(int slot, SpawnerLoss& loss);
  /// The request half of the same-CPU hand-off: pins `slot`'s spawner to the calling
  /// thread's CPU if its own set has that CPU. Under the lock, so the pid is not a
  /// reaped spawner's. False when not pinned.
  bool pin_to_current_cpu(int slot);
  /// Asks `slot`'s spawner to send `sig` to the command of request `request` (now, or at
  /// its launch; never to a later command). Never blocks.
  void signal_command(int slot, std::uint32_t request, int sig);
  /// `slot`'s spawner broke the protocol: kills it and waits until it counts as dead, so
  /// the next job on the slot gets a replacement.
  void replace_broken(int slot);
  /// Why `slot`'s spawner is gone (called once its channel said kSpawnerDead).
  SpawnerLoss loss(int slot) const;
  /// Ends every spawner (EOF on its lifeline; it kills its command and exits) and reaps
  /// it; their channels then say kSpawnerDead. Idempotent.
  void close();
  std::vector<int> pids() const;

 private:
  struct Record {
    SpawnerProcess process;
    bool restart_requested = false;  // a submitter waits for a replacement
    std::string restart_error;       // why the last replacement failed
    SpawnerLoss loss;                // how the last spawner ended
  };

  void launch_locked(std::uint32_t slot);
  bool await_attach_locked(std::uint32_t slot, std::string& error);
  void discard_locked(std::uint32_t slot);
  void monitor_loop();
  void handle_exit_locked(std::uint32_t slot);
  std::string spawner_argument(std::uint32_t slot) const;
  void restart_requested_spawners();
  void wake_monitor();
  void stop_all_locked();

  const std::string spawner_path_;
  const std::chrono::milliseconds start_timeout_;
  Segment& segment_;
  std::vector<std::unique_ptr<SlotChannel>>& channels_;
  const std::vector<std::string> spawner_arguments_;
  const CgroupTree* const cgroups_;
  mutable std::mutex mutex_;
  std::condition_variable spawner_changed_;  // a replacement attached or failed, a death
  std::vector<Record> records_;              // guarded by mutex_, one per slot
  bool stopping_ = false;                    // guarded by mutex_: close() has begun
  int wake_fd_ = -1;                         // eventfd: restart requests and stop
  std::thread monitor_;
};

}  // namespace spawnpool::detail
