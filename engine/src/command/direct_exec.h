// Direct exec: `sh -c LINE` whose line has no shell syntax runs as the program it names,
// which saves one exec per command. For the result to be the shell's, what dash does
// besides exec'ing the program is done here (verified against dash, Debian's /bin/sh,
// in tests/unit/command/direct_exec_test.cc):
// - the environment: dash exports PWD (kept when it names the working directory, also
//   through a symlink, else the physical cwd);
// - a program that cannot start (failure stage exec): the line runs again through sh,
//   which prints its own message ("sh: 1: foo: not found") and exits 126/127; nothing ran
//   the first time. Other failures stand (a spawner that died may have run it);
// - a program killed by signal N: dash exits 128+N and prints strsignal(N) ("Segmentation
//   fault"; nothing for SIGINT and SIGPIPE). SIGINT, SIGTERM, SIGHUP and SIGQUIT normally
//   reach the whole process group, shell included, which then dies of them too: those
//   stay -N, without a message. Not reproduced: dash's " (core dumped)", which needs a
//   status bit the pool does not report (core dumps are off by default).
// Only dash lines (ShellInvocation::as_dash) with a PATH to search (dash's default PATH
// is not execvp's) or a program path are taken. Thread-safe: no state but a small cache
// of physical directories under its own lock; on every command's path by default.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "engine/src/stack/layer.h"

namespace spawnpool::detail {

/// The layer. Needs nothing but its inner layer; reads shell_line, simple_words and
/// launcher_words, runs `launcher_words + simple_words` with PWD exported, and puts
/// `command.command` back as it found it before it returns (or runs it through sh).
class DirectExec : public StackedLayer {
 public:
  using StackedLayer::StackedLayer;
  Result run(PreparedCommand& command) override;
};

/// What sh would have made of a direct-exec'd program's `returncode`.
struct ShStatus {
  int returncode;            ///< 128+N for a signal N that is not a group signal
  std::string_view message;  ///< what sh prints ("Segmentation fault\n"), or empty
};
ShStatus sh_status(int returncode);

/// Sets PWD in `env` as dash exports it for a command run in `cwd` (absolute). Returns
/// how to undo it: restore_pwd() puts `env` back as it was.
struct PwdChange {
  enum Kind { kNone, kAdded, kReplaced } kind = kNone;
  std::string replaced;  ///< the entry that was there (kReplaced)
  std::size_t index = 0;
};
PwdChange export_pwd(std::vector<std::string>& env, const std::string& cwd);
void restore_pwd(std::vector<std::string>& env, PwdChange& change);

}  // namespace spawnpool::detail
