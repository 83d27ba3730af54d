// One submitted command's state from submit to wait: what the scheduler knows of it,
// which slot and request carry it, what its messages name, or its result when it never
// reached a spawner. Owned by its Job; used by the thread that submits it and then by
// the one that waits for it (a Job is moved between threads, never shared).
#pragma once

#include <cstdint>
#include <string>

#include "engine/src/scheduler/scheduling_policy.h"
#include "spawnpool/command.h"
#include "spawnpool/result.h"

namespace spawnpool::detail {

struct JobState {
  JobInfo scheduling;                ///< the scheduler's and its policy's view
  int slot = -1;                     ///< the slot that runs it; -1: `result` is final
  std::uint32_t request_number = 0;  ///< its request's number on the slot (names it in a cancel)
  OutputMode output = OutputMode::kPassthrough;
  bool spawner_pinned = false;       ///< the request went with the same-CPU hint
  /// With a memory budget: the pool's cgroup usage at its dispatch (0: unknown).
  std::int64_t measured_in_use_bytes = 0;
  /// With a memory budget and no slot cgroups: the driver's cgroup's OOM-kill count at
  /// its hand-over (PoolMemory::oom_kills_now(); -1: none).
  std::int64_t oom_kills_at_hand_over = -1;
  /// PoolCore's count of cancel_all() calls when it was submitted: one since then (an
  /// interrupted build) means an OOM-killed run is not run again.
  std::uint64_t cancel_alls_at_submit = 0;
  std::uint64_t progress_id = 0;     ///< its id in PoolOptions::progress; 0: none
  std::string program;               ///< argv[0], for messages
  std::string cwd;                   ///< the working directory as sent, for messages
  Result result;                     ///< the outcome, when it never reached a spawner
};

}  // namespace spawnpool::detail
