// What `make -jN` sets up for its recipes, made here for tests: a pipe (make 4.2, 4.3)
// or a fifo (make 4.4) holding N-1 tokens, with the MAKEFLAGS that name it. The test
// plays make and its other jobs: it counts the tokens in the pipe (FIONREAD, without
// taking them), takes one as another job would, and puts one back. Not thread-safe:
// the test's main thread only.
#pragma once

#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace spawnpool::test {

class MakeJobserver {
 public:
  enum class Style { kPipe, kOldPipe, kFifo };

  /// `jobs`: make's -j; the pipe gets jobs - 1 tokens, bytes 'a', 'b', ... (so a test
  /// can tell that the bytes read are the bytes given back). kFifo needs `fifo_path`.
  MakeJobserver(int jobs, Style style = Style::kPipe, const std::string& fifo_path = "") {
    if (style == Style::kFifo) {
      if (mkfifo(fifo_path.c_str(), 0600) != 0) throw std::runtime_error("mkfifo failed");
      read_fd_ = write_fd_ = open(fifo_path.c_str(), O_RDWR | O_CLOEXEC);  // make keeps it
      makeflags_ = " -j" + std::to_string(jobs) + " --jobserver-auth=fifo:" + fifo_path;
    } else {
      int fds[2];
      if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
      read_fd_ = fds[0];
      write_fd_ = fds[1];
      makeflags_ = " -j" + std::to_string(jobs) +
                   (style == Style::kPipe ? " --jobserver-auth=" : " --jobserver-fds=") +
                   std::to_string(read_fd_) + "," + std::to_string(write_fd_);
    }
    for (int i = 0; i + 1 < jobs; ++i) put(static_cast<char>('a' + i));
  }
  ~MakeJobserver() {
    close(read_fd_);
    if (write_fd_ != read_fd_) close(write_fd_);
  }
  MakeJobserver(const MakeJobserver&) = delete;
  MakeJobserver& operator=(const MakeJobserver&) = delete;

  const std::string& makeflags() const { return makeflags_; }
  int read_fd() const { return read_fd_; }
  /// Tokens in the pipe now (none taken).
  int tokens() const {
    int n = 0;
    if (ioctl(read_fd_, FIONREAD, &n) != 0) return -1;
    return n;
  }
  /// Takes one token, as make's other job would; returns it ('\0': there was none).
  char take() {
    if (tokens() <= 0) return '\0';
    char token = '\0';
    return read(read_fd_, &token, 1) == 1 ? token : '\0';
  }
  /// Takes every token and returns them, in pipe order.
  std::string drain() {
    std::string all;
    while (const char token = take()) all += token;
    return all;
  }
  void put(char token) {
    if (write(write_fd_, &token, 1) != 1) throw std::runtime_error("token write failed");
  }

 private:
  int read_fd_ = -1, write_fd_ = -1;
  std::string makeflags_;
};

}  // namespace spawnpool::test
