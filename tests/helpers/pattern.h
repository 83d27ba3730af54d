// The byte stream print_bytes writes, shared with the tests that check it byte for byte.
// Every byte value occurs (NUL and newline included), and the two streams differ, so a
// chunk placed at the wrong offset or in the wrong stream cannot go unnoticed.
// Pure functions: thread-safe.
#pragma once

#include <cstdint>
#include <string>

namespace spawnpool::test {

/// Byte `offset` of stream `stream` (1: stdout, 2: stderr).
inline char pattern_byte(int stream, std::uint64_t offset) {
  return static_cast<char>((offset * 131 + (offset >> 16) * 7 + stream * 89) & 0xff);
}

/// `size` bytes of stream `stream` from offset 0.
inline std::string pattern(int stream, std::uint64_t size) {
  std::string s(size, '\0');
  for (std::uint64_t i = 0; i < size; ++i) s[i] = pattern_byte(stream, i);
  return s;
}

}  // namespace spawnpool::test
