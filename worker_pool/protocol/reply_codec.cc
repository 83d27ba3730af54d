#include "worker_pool/protocol/reply_codec.h"

#include <algorithm>

namespace spawnpool::detail {

bool reply_chunk_is_valid(const protocol::ReplyHeader& header, std::uint64_t output_capacity,
                          std::uint64_t received, std::string& why) {
  // The stages after kLastSpawnerStage are the engine's own verdicts, never a spawner's.
  if (header.failure_stage < static_cast<std::int32_t>(FailureStage::kNone) ||
      header.failure_stage > static_cast<std::int32_t>(kLastSpawnerStage)) {
    why = "unknown failure stage";
    return false;
  }
  if (header.stdout_size > kMaxCapturedBytes || header.stderr_size > kMaxCapturedBytes) {
    why = "output size out of range";
    return false;
  }
  const std::uint64_t total = header.stdout_size + header.stderr_size;
  if (header.chunk_offset != received || header.chunk_size > output_capacity ||
      header.chunk_size > total - std::min(total, received) ||
      (header.chunk_size == 0 && received < total)) {
    why = "chunk out of sequence";
    return false;
  }
  return true;
}

void place_reply_chunk(const protocol::ReplyHeader& header, const char* chunk,
                       std::string& out, std::string& err) {
  const std::uint64_t begin = header.chunk_offset;
  const std::uint64_t end = begin + header.chunk_size;
  if (begin < header.stdout_size) {
    const std::uint64_t n = std::min(end, header.stdout_size) - begin;
    out.append(chunk, n);
  }
  if (end > header.stdout_size) {
    const std::uint64_t from = std::max(begin, header.stdout_size);
    err.append(chunk + (from - begin), end - from);
  }
}

}  // namespace spawnpool::detail
