// The door of the engine: prepare_command() makes a caller's Command final (absolute cwd,
// complete environment) and reads it once (the shell line, its words, the program and
// output, the compile classification) into the PreparedCommand every layer reads. Call it
// on the caller's thread (the environment is copied there: a binding holding its own
// lock, such as the GIL, calls it before letting go). Thread-safe, as getcwd and environ.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/src/command/compile_classifier.h"
#include "engine/src/command/prepared_command.h"
#include "spawnpool/command.h"

namespace spawnpool::detail {

/// `command` made final and read. An empty cwd is the driver's working directory now, a
/// relative one is taken against it (as Popen would); no environment is the driver's
/// now. `classifier` says which commands are compiles.
PreparedCommand prepare_command(
    Command command, const CompileClassifier& classifier = CompileClassifier::default_compilers());

/// The command's cwd as the spawner is to enter it: absolute, or "" (the spawner's own,
/// which is the driver's at pool start) when the driver's cannot be read.
std::string working_directory(const std::string& cwd);

/// The index in `env` ("NAME=value" entries) of `name`'s entry, or env.size() if none.
std::size_t environment_index(const std::vector<std::string>& env, std::string_view name);

}  // namespace spawnpool::detail
