// write() until everything is out, retrying EINTR and short writes. For the helpers,
// single-threaded; exits with 111 when the stream is gone (the test then sees it).
#pragma once

#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>

namespace spawnpool::test {

inline void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) std::exit(111);
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace spawnpool::test
