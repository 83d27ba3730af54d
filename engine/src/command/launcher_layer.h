// The launcher layer: a compile (PreparedCommand::compile) runs through the compiler
// launcher (launcher.h), every other command as it is. A launched shell line becomes
// `<launcher> <line>` (the launcher put before the compiler's word, after any
// assignments); a launched argv gets the launcher's words in front. The driver's HOME,
// DISTCC_* and CCACHE_* are added to its environment; a distcc compile the caller lets
// print is captured (to spot distcc's "compiled locally" warnings) and printed as one
// block; a launcher's own failure is named in a message. It sets `launched` and `local`
// (local slots count every command that does not go through the launcher) and counts for
// the build's summary line. Thread-safe: the counts are atomics; nothing else changes.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "engine/src/command/launcher.h"
#include "engine/src/stack/layer.h"

namespace spawnpool::detail {

/// What the launcher layer did so far.
struct LauncherCounts {
  std::uint64_t launched = 0;         ///< compiles run through the launcher
  std::uint64_t ran_locally = 0;      ///< ... of which distcc said it compiled locally
  std::uint64_t launcher_failed = 0;  ///< ... of which the launcher itself failed
  std::uint64_t local_commands = 0;   ///< commands that ran as they are (local)
};

class LauncherLayer : public StackedLayer {
 public:
  /// `message_prefix` starts each message and the summary ("spawnpool", "scons"). Looks
  /// at fds 1 and 2 now: the same open file means distcc compiles are captured merged.
  LauncherLayer(Layer& inner, Launcher launcher, std::string message_prefix = "spawnpool");

  Result run(PreparedCommand& command) override;

  const Launcher& launcher() const { return launcher_; }
  LauncherCounts counts() const;
  /// The summary line, without a newline: "<prefix>: distcc: N compiles through distcc,
  /// M of them compiled locally by distcc (fallback), F failed in distcc; L other
  /// commands ran locally" (the fallback part for distcc only).
  std::string summary() const;

 private:
  Result launch(PreparedCommand& command);
  void rewrite(PreparedCommand& command) const;

  const Launcher launcher_;
  const std::string prefix_;
  const OutputMode capture_mode_;
  std::atomic<std::uint64_t> launched_{0};
  std::atomic<std::uint64_t> ran_locally_{0};
  std::atomic<std::uint64_t> launcher_failed_{0};
  std::atomic<std::uint64_t> local_commands_{0};
};

}  // namespace spawnpool::detail
