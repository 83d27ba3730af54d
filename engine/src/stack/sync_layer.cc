#include "engine/src/stack/sync_layer.h"

#include "engine/src/command/console.h"

namespace spawnpool::detail {

SyncLayer::SyncLayer(Layer& inner)
    : SyncLayer(inner, console::streams_merged() ? OutputMode::kCaptureMerged
                                                 : OutputMode::kCapture) {}

Result SyncLayer::run(PreparedCommand& command) {
  if (command.command.output != OutputMode::kPassthrough) return inner_.run(command);
  command.command.output = capture_mode_;
  Result result = inner_.run(command);
  if (result.captured) console::output_block(result.stdout_data, result.stderr_data);
  return result;
}

}  // namespace spawnpool::detail
