// A compiler launcher (distcc, ccache, icecc, `ccache distcc` ...), as CMake's
// <LANG>_COMPILER_LAUNCHER: a compile runs as `<launcher> <compile>`, every other command
// as it is; the driver's command lines, hence its build signatures, never change. Its
// program is looked up once on the driver's PATH (the commands' own PATH need not have it).
// What it knows of the launcher's failures and of distcc's local fallbacks is here; the
// layer that applies it is launcher_layer.h. Immutable once made: thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spawnpool::detail {

class Launcher {
 public:
  /// `command` is shell text (`distcc`, `ccache --flag`); `driver_environment` is the
  /// driver's ("NAME=value"): its PATH finds the program, its HOME, DISTCC_*, CCACHE_*,
  /// ICECC_* and SCCACHE_* are given to commands that lack them. Throws
  /// std::invalid_argument for an empty command or one with shell syntax.
  Launcher(std::string_view command, const std::vector<std::string>& driver_environment);

  const std::string& name() const { return name_; }  ///< its program's file name
  bool found() const { return found_; }              ///< it was found on the driver's PATH
  bool is_distcc() const { return is_distcc_; }      ///< distcc is (one of) its programs
  /// Its words: the resolved program (as given when not found), then its arguments.
  const std::vector<std::string>& words() const { return words_; }
  /// The words quoted for a sh line: what goes before the compiler in a launched line.
  const std::string& prefix() const { return prefix_; }

  /// Adds to `env` the driver's launcher variables it lacks: HOME (distcc finds
  /// ~/.distcc/hosts there and silently compiles locally without it) and each launcher's
  /// settings.
  void add_environment(std::vector<std::string>& env) const;
  /// Whether the launcher's messages in `output` say it compiled on this machine.
  bool ran_locally(std::string_view output) const;
  /// A sentence naming the launcher when `status` is the launcher's own failure (not
  /// found, not executable, one of distcc's exit codes), else empty.
  std::string failure(int status) const;

 private:
  std::string name_;
  bool found_ = false;
  bool is_distcc_ = false;
  std::vector<std::string> words_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::string>> driver_env_;  // name, whole entry
};

}  // namespace spawnpool::detail
