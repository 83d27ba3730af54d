#include "engine/src/stack/pool_layer.h"

#include "engine/src/command/prepared_command.h"

namespace spawnpool::detail {

Result PoolLayer::run(PreparedCommand& command) {
  static const WaitTick kNoTick;
  Job job = pool_.submit_prepared(command);
  return pool_.wait(job, command.wait_tick ? *command.wait_tick : kNoTick);
}

}  // namespace spawnpool::detail
