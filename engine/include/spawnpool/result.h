// The outcome of one command: a value type. A failing command is data, never an
// exception: a non-zero exit, a signal, or a launch failure with its stage and errno.
#pragma once

#include <cstdint>
#include <string>

namespace spawnpool {

/// Why a command has no exit status.
enum class FailureStage {
  kNone = 0,     ///< the command ran
  kRequest = 1,  ///< refused before anything ran (E2BIG, EINVAL for a NUL byte)
  kChdir = 2,    ///< the working directory could not be entered
  kExec = 3,     ///< the program could not be executed (ENOENT, EACCES, ENOEXEC...)
  kSpawner = 4,  ///< the spawner died or failed while serving it, or the pool is closed
};

struct Result {
  /// Exit status, or -N when killed by signal N (as subprocess.Popen reports it).
  /// -1 when the command never ran (see failure).
  int returncode = -1;
  FailureStage failure = FailureStage::kNone;
  int error_number = 0;        ///< errno for a failure
  std::string error_message;   ///< a sentence naming what failed, empty when it ran
  bool captured = false;       ///< whether stdout_data/stderr_data hold the output
  std::string stdout_data;
  std::string stderr_data;
  double user_time = 0;        ///< seconds of user CPU of the command and its waited-for children
  double system_time = 0;
  double wall_time = 0;        ///< from the child's start to its exit, in seconds
  long max_rss_kb = 0;
  int slot = -1;                ///< the job slot (spawner) that ran it, -1 if none did
  // CLOCK_MONOTONIC nanoseconds, for tracing: when the driver submitted the command,
  // when it had a slot for it (the difference is queueing), when the child existed, when
  // it was reaped, and when the driver had the result.
  std::int64_t submitted_ns = 0;
  std::int64_t dispatched_ns = 0;
  std::int64_t started_ns = 0;
  std::int64_t exited_ns = 0;
  std::int64_t completed_ns = 0;

  bool started() const { return failure == FailureStage::kNone; }
};

/// "chdir", "exec"... for messages; "" for kNone.
const char* stage_name(FailureStage stage);

}  // namespace spawnpool
