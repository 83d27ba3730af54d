// The history's names for a prepared command (history_store_key.h hashes them): the exact
// key from the argv and cwd that run now, the fallback and program keys from the program
// and output prepare_command() found, so that a compile behind a launcher is keyed by its
// compiler, not by `distcc`. Pure function, safe from any thread.
#pragma once

#include "engine/src/command/prepared_command.h"

namespace spawnpool::detail {

/// The keys of `command` as it is about to run: its exact key hashes `command.command`
/// (after the layers: the words direct exec runs, as the history always had them), its
/// program key `program_name`, its fallback key `program_name` and `output`.
CommandKey make_command_key(const PreparedCommand& command);

}  // namespace spawnpool::detail
