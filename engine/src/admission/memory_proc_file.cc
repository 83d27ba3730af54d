#include "engine/src/admission/memory_proc_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace spawnpool::detail {

ProcFile::~ProcFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<std::string> ProcFile::read() {
  if (fd_ < 0) fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return std::nullopt;
  // Kernel text files are generated at offset 0 on each read from there: pread(0)
  // sees a fresh copy without a seek.
  std::string content;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::pread(fd_, buffer, sizeof buffer, static_cast<off_t>(content.size()));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return std::nullopt;
    if (got == 0) return content;
    content.append(buffer, static_cast<std::size_t>(got));
  }
}

}  // namespace spawnpool::detail
