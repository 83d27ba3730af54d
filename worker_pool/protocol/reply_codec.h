// Checking and placing one reply chunk on the driver side. Pure functions: thread-safe.
// The driver trusts nothing it reads: a spawner could be buggy or corrupted.
#pragma once

#include <cstdint>
#include <string>

#include "worker_pool/protocol/protocol.h"

namespace spawnpool::detail {

/// Largest captured output (stdout plus stderr) the driver accepts from one command.
inline constexpr std::uint64_t kMaxCapturedBytes = std::uint64_t{1} << 40;

/// Whether `header` is a sane chunk following `received` bytes already taken.
bool reply_chunk_is_valid(const protocol::ReplyHeader& header, std::uint64_t output_capacity,
                          std::uint64_t received, std::string& why);

/// Bytes to reserve for an output the first chunk announces as `announced`. The size is
/// the spawner's word, so it is never trusted with one huge allocation; a larger output
/// grows as its chunks arrive.
inline std::uint64_t reply_reserve_bytes(std::uint64_t announced) {
  constexpr std::uint64_t kMaxReserve = std::uint64_t{64} << 20;
  return announced < kMaxReserve ? announced : kMaxReserve;
}

/// Appends a valid chunk to `out` (the stdout part) and `err` (the stderr part).
void place_reply_chunk(const protocol::ReplyHeader& header, const char* chunk,
                       std::string& out, std::string& err);

}  // namespace spawnpool::detail
