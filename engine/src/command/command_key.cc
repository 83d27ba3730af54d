#include "engine/src/command/command_key.h"

namespace spawnpool::detail {

CommandKey make_command_key(const PreparedCommand& command) {
  return hash_command_key(command.command.argv, command.command.cwd, command.program_name,
                          command.output);
}

}  // namespace spawnpool::detail
