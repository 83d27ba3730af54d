// Encoding of a command into a slot's request area (driver side) and its validated
// decoding (spawner side). Pure functions over caller-owned memory: thread-safe.
// The decoder trusts nothing it reads: the segment is writable by another process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "worker_pool/protocol/protocol.h"

namespace spawnpool::detail {

/// What the driver asks a spawner to run.
struct RequestFields {
  const std::vector<std::string>* argv;  // argv[0] names the program
  const std::vector<std::string>* env;   // "NAME=value" entries, complete
  const std::string* cwd;                // empty: the spawner's own cwd
  std::uint32_t flags;                   // protocol::RequestFlags
  std::uint32_t number;                  // the slot's request counter
};

/// Why a request could not be encoded: an errno value and a sentence for the user.
struct EncodeError {
  int error_number = 0;  // 0: no error
  std::string message;
};

/// Checks `fields` against what execve() accepts (`arg_max` bytes in all, one argument at
/// most MAX_ARG_STRLEN, no NUL inside a string) and the slot's `capacity`, then writes
/// them. Nothing is written when the returned error_number is non-zero.
EncodeError encode_request(const RequestFields& fields, std::uint64_t arg_max,
                           std::uint64_t capacity, protocol::RequestHeader* header,
                           char* payload);

/// A request copied out of shared memory and checked; pointers refer to `storage`.
struct DecodedRequest {
  std::vector<char> storage;
  std::vector<char*> argv;  // NULL-terminated, for execve
  std::vector<char*> envp;  // NULL-terminated, for execve
  const char* cwd = nullptr;  // nullptr: stay in the spawner's cwd
  std::uint32_t flags = 0;
  std::uint32_t number = 0;
};

/// Copies the request once (so a writer cannot change it under us) and validates it.
/// Returns false with `why` set when it is malformed; `out` is then unspecified.
bool decode_request(const protocol::RequestHeader& header, const char* payload,
                    std::uint64_t capacity, DecodedRequest& out, std::string& why);

}  // namespace spawnpool::detail
