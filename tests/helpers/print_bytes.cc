// print_bytes OUT_BYTES ERR_BYTES: writes pattern(1) to stdout and pattern(2) to stderr
// (tests/helpers/pattern.h), alternating 64 KiB blocks so that both pipes fill at once.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tests/helpers/pattern.h"
#include "tests/helpers/write_all.h"

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const std::uint64_t sizes[2] = {std::strtoull(argv[1], nullptr, 10),
                                  std::strtoull(argv[2], nullptr, 10)};
  const std::string streams[2] = {spawnpool::test::pattern(1, sizes[0]),
                                   spawnpool::test::pattern(2, sizes[1])};
  constexpr std::uint64_t kBlock = 64 * 1024;
  std::uint64_t done[2] = {0, 0};
  while (done[0] < sizes[0] || done[1] < sizes[1]) {
    for (int s = 0; s < 2; ++s) {
      const std::uint64_t n = std::min(kBlock, sizes[s] - done[s]);
      spawnpool::test::write_all(s + 1, streams[s].data() + done[s], n);
      done[s] += n;
    }
  }
  return 0;
}
