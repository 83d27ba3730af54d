// What a build driver asks the pool to run. A plain value type; no threading concerns.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace spawnpool {

/// Where a command's stdout and stderr go.
enum class OutputMode {
  kPassthrough,    ///< the driver's fds 1 and 2, as they were when the pool started
  kCapture,        ///< returned in Result::stdout_data and Result::stderr_data
  kCaptureMerged,  ///< stderr into stdout, in write order; Result::stdout_data only
};

/// One command. The program is found as execvp() would, searching PATH from `env`.
struct Command {
  std::vector<std::string> argv;  ///< argv[0] names the program
  /// Complete environment as "NAME=value" entries; unset: the driver's environment at
  /// submit time.
  std::optional<std::vector<std::string>> env;
  /// Working directory; empty: the driver's working directory at submit time.
  std::string cwd;
  OutputMode output = OutputMode::kPassthrough;
};

/// The driver's environment now, as "NAME=value" entries: what a Command without `env`
/// gets at submit. A binding whose language guards the environment with a lock of its
/// own (Python's GIL: os.environ's putenv runs under it) copies it here with that lock
/// held and sets Command::env, so that no other thread's putenv races the copy.
/// Thread-safe as far as environ is: not against a concurrent setenv.
std::vector<std::string> current_environment();

}  // namespace spawnpool
