// The outcome of one command: a value type. A failing command is data, never an
// exception: a non-zero exit, a signal, or a launch failure with its stage and errno.
#pragma once

#include <cstdint>
#include <string>

#include "spawnpool/failure_stage.h"

namespace spawnpool {

struct Result {
  /// Exit status, or -N when killed by signal N (as subprocess.Popen reports it).
  /// -1 when the command never ran (see failure).
  int returncode = -1;
  FailureStage failure = FailureStage::kNone;
  /// errno for a failure. kSpawnerDied carries ECHILD and kPoolClosed ESHUTDOWN, so that
  /// OSError-style callers have one; tell failures apart by `failure`, not by errno.
  int error_number = 0;
  std::string error_message;   ///< a sentence naming what failed, empty when it ran
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

  bool started() const { return failure == FailureStage::kNone; }
};

}  // namespace spawnpool
