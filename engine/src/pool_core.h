// The driver side of the pool behind spawnpool::Pool, composed of three parts: the
// Scheduler (which job gets which free slot, under a SchedulingPolicy), the
// SpawnerSupervisor (the spawners' lifetime) and one passive SlotChannel per slot (the
// protocol exchange). PoolCore only sequences them for a job: schedule, make sure of the
// spawner, send, collect, release. Thread-safe (each part is); no lock of its own.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "job_state.h"
#include "scheduler.h"
#include "segment.h"
#include "slot_channel.h"
#include "spawner_supervisor.h"
#include "spawnpool/pool.h"

namespace spawnpool::detail {

class PoolCore {
 public:
  /// Starts the spawners; throws std::system_error when the pool cannot start.
  PoolCore(const PoolOptions& options, std::unique_ptr<SchedulingPolicy> policy);
  ~PoolCore();  ///< close()
  PoolCore(const PoolCore&) = delete;
  PoolCore& operator=(const PoolCore&) = delete;

  /// Schedules `command` and hands it to its slot's spawner. A command refused on the way
  /// (closed pool, bad request, no spawner) comes back as a job with its result final.
  /// `blocking` false: nullptr when the scheduler would not start it now.
  std::unique_ptr<JobState> submit(const Command& command, bool blocking);
  /// Collects `job`'s reply (or takes its final result) and gives its slot back.
  Result wait(JobState& job, const WaitTick& tick, std::chrono::milliseconds tick_period);
  /// Sends `sig` to the process group of `job`'s command, if it still runs.
  void cancel(const JobState& job, int sig);
  void cancel_all(int sig);
  void close();
  std::size_t slot_count() const { return channels_.size(); }
  std::vector<int> spawner_pids() const { return supervisor_.pids(); }

 private:
  void finish_unsent(JobState& job, Result result);
  Result collect(JobState& job, const WaitTick& tick, std::chrono::milliseconds tick_period);

  const PoolOptions options_;
  const std::uint64_t arg_max_;  // what execve() accepts in all (RLIMIT_STACK / 4)
  Segment segment_;
  std::vector<std::unique_ptr<SlotChannel>> channels_;  // one per slot
  SpawnerSupervisor supervisor_;
  Scheduler scheduler_;
};

}  // namespace spawnpool::detail
