// The driver side of the pool behind spawnpool::Pool, composed of three parts: the
// Scheduler (which job gets which free slot, under a SchedulingPolicy), the
// SpawnerSupervisor (the spawners' lifetime) and one passive SlotChannel per slot (the
// protocol exchange), the history (peaks and durations) when there is one, plus, with a
// memory budget, PoolMemory (cgroups, the admission policy). PoolCore only sequences them for a job: schedule, make sure of the
// spawner, send, collect, (once, after an OOM kill: run again alone), release.
// Thread-safe (each part is); no lock of its own.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/src/command/prepared_command.h"
#include "engine/src/pool/pool_memory.h"
#include "engine/src/pool/job_state.h"
#include "engine/src/pool/stop_signal.h"
#include "engine/src/progress/build_progress.h"
#include "engine/src/scheduler/scheduler.h"
#include "engine/src/spawners/segment.h"
#include "engine/src/spawners/slot_channel.h"
#include "engine/src/spawners/spawner_supervisor.h"
#include "spawnpool/pool.h"

namespace spawnpool::detail {

class PoolCore {
 public:
  /// Starts the spawners; throws std::system_error when the pool cannot start.
  /// `options` are complete (Pool resolves the defaults).
  explicit PoolCore(const PoolOptions& options);
  ~PoolCore();  ///< close()
  PoolCore(const PoolCore&) = delete;
  PoolCore& operator=(const PoolCore&) = delete;

  /// Schedules `command` (prepare_command() made it: its cwd and environment are final)
  /// and hands what it runs now (`command.command`) to its slot's spawner; with a memory
  /// budget it sets `command.key` first. A command refused on the way (closed pool, bad
  /// request, no spawner) comes back as a job with its result final. `blocking` false:
  /// nullptr when the scheduler would not start it now.
  std::unique_ptr<JobState> submit(PreparedCommand& command, bool blocking);
  /// Collects `job`'s reply (or takes its final result) and gives its slot back.
  Result wait(JobState& job, const WaitTick& tick, std::chrono::milliseconds tick_period);
  /// Sends `sig` to the process group of `job`'s command, if it still runs.
  void cancel(const JobState& job, int sig);
  void cancel_all(int sig);
  /// Pool::interrupt(): queued and later commands, and those dispatched but not yet
  /// handed over, come back as killed by `sig`.
  void interrupt(int sig) {
    stop_.note(sig);
    scheduler_.interrupt(sig);
  }
  void close();
  std::size_t slot_count() const { return channels_.size(); }
  std::vector<int> spawner_pids() const { return supervisor_.pids(); }

 private:
  void finish_unsent(JobState& job, Result result);
  void hand_over(JobState& job);
  Result collect(JobState& job, const WaitTick& tick, std::chrono::milliseconds tick_period);
  Result run_again_alone(JobState& job, Result killed, const WaitTick& tick,
                         std::chrono::milliseconds tick_period);
  void add_memory_fields(const JobState& job, Result& r) const;
  static void add_wait_fields(const JobInfo& info, Result& r);
  bool stopped_before_start(JobState& job);
  int spawners_stop_signal() const;
  void check_cpu_give_backs(int slot, const SlotChannel::Reply& reply);
  void progress_finished(JobState& job, const Result& r);

  const PoolOptions options_;
  const std::uint64_t arg_max_;  // what execve() accepts in all (RLIMIT_STACK / 4)
  Segment segment_;
  std::shared_ptr<HistoryStore> history_;  // null without a history
  std::unique_ptr<PoolMemory> memory_;  // null without a memory budget
  std::shared_ptr<BuildProgress> progress_;  // null: nobody follows the build
  std::vector<std::unique_ptr<SlotChannel>> channels_;  // one per slot
  SpawnerSupervisor supervisor_;
  Scheduler scheduler_;
  StopLatch stop_;  // a stop signal or interrupt(): no dispatched command starts after it
  std::atomic<std::uint64_t> cancel_alls_{0};  // cancel_all() calls so far
  // The same-CPU hand-off (options_.same_cpu_handoff), until a CPU set could not be given
  // back after a pin (then off for the pool's life, said once).
  std::atomic<bool> same_cpu_handoff_;
  std::atomic<bool> cpu_warned_{false};  // a give-back's trouble was reported
};

}  // namespace spawnpool::detail
