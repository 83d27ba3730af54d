#include "engine/src/command/console.h"

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <mutex>

namespace spawnpool::detail::console {
namespace {

// One lock for the whole process: every layer and every stack share the console.
std::mutex& console_lock() {
  static std::mutex lock;
  return lock;
}

// All of `data`, also to a descriptor someone set non-blocking; false on an error.
bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n >= 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      (void)poll(&p, 1, -1);
    } else if (errno != EINTR) {
      return false;
    }
  }
  return true;
}

Writer g_writer;  // set while no command runs (set_writer)

}  // namespace

void set_writer(Writer writer) { g_writer = writer; }

void message(std::string_view text) {
  if (g_writer.message) return g_writer.message(text);
  const std::lock_guard<std::mutex> hold(console_lock());
  (void)write_all(STDERR_FILENO, text);
}

void output_block(std::string_view out, std::string_view err) {
  if (out.empty() && err.empty()) return;
  if (g_writer.output_block) return g_writer.output_block(out, err);
  const std::lock_guard<std::mutex> hold(console_lock());
  if (write_all(STDOUT_FILENO, out)) (void)write_all(STDERR_FILENO, err);
}

bool streams_merged() {
  struct stat a, b;
  if (fstat(STDOUT_FILENO, &a) != 0 || fstat(STDERR_FILENO, &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace spawnpool::detail::console
