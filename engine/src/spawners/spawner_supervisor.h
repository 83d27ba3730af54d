// The spawners' lifetime on the driver side: start and attach, death (a monitor thread
// polls every spawner's pidfd; with per-slot cgroups it then empties the slot), a
// replacement when a submitter finds its slot's spawner dead, close (a goodbye on each
// lifeline first). Threading: thread-safe. State is per slot, each under its own mutex,
// so that a replacement attaching (up to start_timeout) stalls only the job that waits
// for it; no call takes two slots' locks. The monitor reaps the spawners it watches
// (attached ones); the submitter that asked for a replacement starts it, waits for it to
// attach and discards it if it does not; close() stops the monitor, then ends the rest.
#pragma once

#include <sys/types.h>

#include <atomic>
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
  /// Makes sure `slot` has a live spawner: if it died, waits until the monitor has
  /// reaped it (and emptied its slot), then starts a replacement and waits for it to
  /// attach. Only the job holding `slot` calls this. False, with why in `loss`, when none
  /// serves.
  bool ensure_alive(int slot, SpawnerLoss& loss);
  /// The request half of the same-CPU hand-off: pins `slot`'s spawner to the calling
  /// thread's CPU if its own set has that CPU. Under the slot's lock, so the pid is not a
  /// reaped spawner's. False when not pinned.
  bool pin_to_current_cpu(int slot);
  /// Undoes that pin from outside, for a spawner that could not (kCpusNotGivenBack): its
  /// set from before the pin, else every CPU its cpuset allows.
  CpuGiveBack give_cpus_back(int slot);
  /// Asks `slot`'s spawner to send `sig` to the command of request `request` (now, or at
  /// its launch; never to a later command). Never blocks: it takes only the lifeline's
  /// lock, which nothing holds while it waits. A message the full socket cannot take now
  /// is kept and sent by the monitor once there is room, in order.
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
  // One slot's spawner. `mutex` guards the fields after it up to `lifeline_mutex`;
  // `lifeline_mutex` (taken after `mutex` when both are) guards `lifeline_fd` and
  // `unsent`, and is held only to send, queue or close, never while waiting.
  struct Record {
    std::mutex mutex;
    std::condition_variable changed;  // exit_handled or restarting changed, close()
    SpawnerProcess process;      // pid -1: none
    bool watched = false;        // attached: the monitor watches its pidfd and reaps it
    bool restarting = false;     // the slot's job waits for its replacement to attach
    bool exit_handled = true;    // no spawner, and nothing of the last one left to clean
    std::string restart_error;   // why the last replacement failed
    SpawnerLoss loss;            // how the last spawner ended
    CpuSet cpus_before_pin;      // the spawner's set before the last same-CPU pin

    std::mutex lifeline_mutex;
    int lifeline_fd = -1;                           // process.lifeline_fd, for senders
    std::vector<protocol::CancelMessage> unsent;    // the socket was full: in order
  };

  void launch_locked(std::uint32_t slot, Record& record);
  bool await_attach(std::uint32_t slot, Record& record, std::string& error);
  void restart(std::uint32_t slot, Record& record, std::unique_lock<std::mutex>& lock);
  void discard_locked(std::uint32_t slot, Record& record);
  void release_locked(Record& record);
  void monitor_loop();
  void handle_exit_locked(std::uint32_t slot, Record& record);
  void exit_handled(Record& record);
  static void send_unsent(Record& record);
  std::string spawner_argument(std::uint32_t slot) const;
  void wake_monitor();
  void stop_all();

  const std::string spawner_path_;
  const std::chrono::milliseconds start_timeout_;
  Segment& segment_;
  std::vector<std::unique_ptr<SlotChannel>>& channels_;
  const std::vector<std::string> spawner_arguments_;
  const CgroupTree* const cgroups_;
  std::vector<std::unique_ptr<Record>> records_;  // one per slot, for the pool's life
  std::mutex close_mutex_;                         // close() runs once
  std::atomic<bool> stopping_{false};              // close() has begun
  int wake_fd_ = -1;  // eventfd: a spawner to watch, a message to send, stop
  std::thread monitor_;
};

}  // namespace spawnpool::detail
