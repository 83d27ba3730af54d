#include "engine/src/pool/command_fields.h"

#include "worker_pool/protocol/protocol.h"

namespace spawnpool::detail {

std::uint32_t request_flags(OutputMode output) {
  switch (output) {
    case OutputMode::kPassthrough: return 0;
    case OutputMode::kCapture: return protocol::kCaptureOutput;
    case OutputMode::kCaptureMerged: return protocol::kCaptureOutput | protocol::kMergeStderr;
  }
  return 0;
}

}  // namespace spawnpool::detail
