// The outcome of one command: a value type. A failing command is data, never an
// exception: a non-zero exit, a signal, or a launch failure with its stage and errno.
#pragma once

#include <cstdint>
#include <string>

#include "spawnpool/failure_stage.h"

namespace spawnpool {

/// Where Result::peak_memory_bytes comes from.
enum class MemorySource : std::int32_t {
  kNone = 0,    ///< nothing was measured (the command never ran)
  kRusage = 1,  ///< ru_maxrss: the largest single process of the command, not their sum
  /// memory.peak of the command's own cgroup (v2, a cgroup per command), or of its slot's
  /// (v1, reset before each command): everything the command started, together.
  kCgroup = 2,
  /// The highest memory.current of the command's own cgroup, sampled while it ran (v2
  /// kernels without memory.peak, before 5.19): the whole tree, but a peak shorter than
  /// the sampling interval may be missed. Never below ru_maxrss.
  kCgroupSampled = 3,
};

struct Result {
  /// Exit status, or -N when killed by signal N (as subprocess.Popen reports it).
  /// -1 when the command never ran (see failure).
  int returncode = -1;
  FailureStage failure = FailureStage::kNone;
  /// errno for a failure. kSpawnerDied carries ECHILD and kPoolClosed ESHUTDOWN, so that
  /// OSError-style callers have one; tell failures apart by `failure`, not by errno.
  int error_number = 0;
  /// A sentence naming what failed, empty when it ran; also set for a command that ran
  /// but was killed by the OOM killer (see oom_killed).
  std::string error_message;
  bool captured = false;       ///< whether stdout_data/stderr_data hold the output
  std::string stdout_data;
  std::string stderr_data;
  double user_time = 0;        ///< seconds of user CPU of the command and its waited-for children
  double system_time = 0;
  double wall_time = 0;        ///< from the child's start to its exit, in seconds
  long max_rss_kb = 0;
  int slot = -1;                ///< the job slot (spawner) that ran it, -1 if none did
  // CLOCK_MONOTONIC nanoseconds (one clock for every process), for tracing: when the
  // driver submitted the command, when it had a slot for it (the difference is queueing),
  // when the spawner saw the request, when it was about to start the command's process
  // (before the clone: launch_ns - received_ns is the spawner's own preparation, and
  // started_ns - launch_ns the process creation), when the child existed, when it was
  // reaped, and when the driver had the result. 0 where a command never got that far.
  std::int64_t submitted_ns = 0;
  std::int64_t dispatched_ns = 0;
  std::int64_t received_ns = 0;
  std::int64_t launch_ns = 0;
  std::int64_t started_ns = 0;
  std::int64_t exited_ns = 0;
  std::int64_t completed_ns = 0;
  // What it waited for between submitted_ns and dispatched_ns, over all its runs, as the
  // scheduler names it (one reason at a time: the first thing it lacked): a free slot,
  // admission while a slot was free (memory, or an OOM retry running alone), a local
  // slot (PoolOptions::local_slots), a make jobserver token (PoolOptions::jobserver).
  std::int64_t slot_wait_ns = 0;
  std::int64_t memory_wait_ns = 0;
  std::int64_t local_slot_wait_ns = 0;
  std::int64_t jobserver_wait_ns = 0;

  // Memory (docs/features.md, "Memory-aware admission"). Without a memory budget only the
  // first two are set, from ru_maxrss.
  std::int64_t peak_memory_bytes = 0;          ///< the command's peak; 0: unknown
  MemorySource memory_source = MemorySource::kNone;
  /// The OOM killer killed a process of the command's last run (the cgroup says so,
  /// whatever the exit status). The command was run again alone once first (oom_retries),
  /// so this means it did not fit even then; error_message says so, with its peak.
  bool oom_killed = false;
  int oom_retries = 0;                         ///< runs again after an OOM kill (0 or 1)
  std::int64_t predicted_peak_bytes = 0;       ///< the admission's forecast; 0: none
  /// At its (last) dispatch, for the trace's memory counter: the running commands'
  /// predicted peaks, its own included, and what the pool's cgroup used (0: unknown).
  std::int64_t predicted_in_use_bytes = 0;
  std::int64_t measured_in_use_bytes = 0;

  bool started() const { return failure == FailureStage::kNone; }
};

}  // namespace spawnpool
