// What the spawner-piece tests share: a ChildSetup for a helper program with stdin
// /dev/null and stdout into a pipe, reading that pipe to EOF, and reaping a child.
// Header-only; single-threaded use, like the pieces under test.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "tests/unit/support/test_support.h"
#include "worker_pool/spawner/child_start.h"

namespace spawnpool::test {

/// A helper program's command line and the fds a child gets. Owns what it opens.
class HelperChild {
 public:
  explicit HelperChild(const std::string& name, std::vector<std::string> args = {}) {
    argv_strings_.push_back(helper(name));
    for (auto& a : args) argv_strings_.push_back(std::move(a));
    for (auto& s : argv_strings_) argv_.push_back(s.data());
    argv_.push_back(nullptr);
    envp_.push_back(nullptr);
    stdin_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fds[2] = {-1, -1};
    if (pipe2(fds, O_CLOEXEC) == 0) {
      read_fd_ = fds[0];
      write_fd_ = fds[1];
    }
    setup_.path = argv_strings_[0].c_str();
    setup_.argv = argv_.data();
    setup_.envp = envp_.data();
    setup_.stdin_fd = stdin_fd_;
    setup_.stdout_fd = write_fd_;
  }
  ~HelperChild() {
    for (int fd : {stdin_fd_, read_fd_, write_fd_})
      if (fd >= 0) close(fd);
  }
  HelperChild(const HelperChild&) = delete;
  HelperChild& operator=(const HelperChild&) = delete;

  detail::ChildSetup& setup() { return setup_; }
  /// Closes our copy of the pipe's write end, then reads what the child wrote, to EOF.
  std::string read_output() {
    if (write_fd_ >= 0) close(write_fd_);
    write_fd_ = -1;
    std::string out;
    char buffer[4096];
    for (;;) {
      const ssize_t n = read(read_fd_, buffer, sizeof buffer);
      if (n > 0) out.append(buffer, static_cast<std::size_t>(n));
      else if (n == 0 || errno != EINTR) break;
    }
    return out;
  }

 private:
  std::vector<std::string> argv_strings_;
  std::vector<char*> argv_;
  std::vector<char*> envp_;
  int stdin_fd_ = -1;
  int read_fd_ = -1;
  int write_fd_ = -1;
  detail::ChildSetup setup_;
};

/// Reaps `pid`; its wait status, or -1.
inline int reap(pid_t pid) {
  int status = 0;
  pid_t got;
  do got = waitpid(pid, &status, 0);
  while (got < 0 && errno == EINTR);
  return got == pid ? status : -1;
}

/// Whether this process has no child left, zombie or alive.
inline bool no_children() {
  siginfo_t info{};
  return waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
}

}  // namespace spawnpool::test
