#include "engine/src/history/history_store_key.h"

#include <cstring>
#include <string_view>

namespace spawnpool::detail {
namespace {

// Each key kind hashes with its own seed, so an exact key can never equal a fallback key
// by construction of the bytes alone.
constexpr std::uint64_t kExactSeed = 0x5350'4558'4143'5431ULL;     // "SPEXACT1"
constexpr std::uint64_t kFallbackSeed = 0x5350'4641'4c4c'4231ULL;  // "SPFALLB1"
constexpr std::uint64_t kProgramSeed = 0x5350'5052'4f47'5231ULL;   // "SPPROGR1"
constexpr std::uint64_t kOutputSeed = 0x5350'4f55'5450'5431ULL;    // "SPOUTPT1"

void append_field(std::string& buffer, std::string_view field) {
  buffer.append(field);
  buffer.push_back('\0');  // argv strings hold no NUL, so the fields cannot run together
}

// Hashes never give 0, which means "no key" in CommandKey.
std::uint64_t nonzero(std::uint64_t hash) { return hash == 0 ? 1 : hash; }

}  // namespace

std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed) {
  constexpr std::uint64_t m = 0xc6a4a7935bd1e995ULL;
  constexpr int r = 47;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed ^ (size * m);
  const unsigned char* const blocks_end = p + (size / 8) * 8;
  for (; p != blocks_end; p += 8) {
    std::uint64_t k;
    std::memcpy(&k, p, 8);
    k *= m;
    k ^= k >> r;
    k *= m;
    h ^= k;
    h *= m;
  }
  const std::size_t tail = size & 7;
  if (tail) {
    for (std::size_t i = tail; i-- > 0;) h ^= std::uint64_t(p[i]) << (8 * i);
    h *= m;
  }
  h ^= h >> r;
  h *= m;
  h ^= h >> r;
  return h;
}

CommandKey hash_command_key(const std::vector<std::string>& argv, const std::string& cwd,
                            std::string_view program_name, std::string_view output) {
  CommandKey key;
  std::string buffer;
  std::size_t total = cwd.size() + 1;
  for (const std::string& arg : argv) total += arg.size() + 1;
  buffer.reserve(total);
  append_field(buffer, cwd);
  for (const std::string& arg : argv) append_field(buffer, arg);
  key.exact = nonzero(hash_bytes(buffer.data(), buffer.size(), kExactSeed));

  key.program = nonzero(hash_bytes(program_name.data(), program_name.size(), kProgramSeed));
  if (!output.empty()) {
    buffer.clear();
    append_field(buffer, program_name);
    // A relative output names a different file in another directory.
    append_field(buffer, output[0] == '/' ? std::string_view() : cwd);
    append_field(buffer, output);
    key.fallback = nonzero(hash_bytes(buffer.data(), buffer.size(), kFallbackSeed));
    key.output = hash_output_path(output, cwd);
  }
  return key;
}

std::uint64_t hash_output_path(std::string_view path, std::string_view cwd) {
  while (path.size() > 2 && path.substr(0, 2) == "./") path.remove_prefix(2);
  if (path.empty() || path[0] == '/' || cwd.empty())
    return nonzero(hash_bytes(path.data(), path.size(), kOutputSeed));
  std::string joined(cwd);
  if (joined.back() != '/') joined.push_back('/');
  joined.append(path);
  return nonzero(hash_bytes(joined.data(), joined.size(), kOutputSeed));
}

}  // namespace spawnpool::detail
