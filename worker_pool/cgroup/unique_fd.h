// An owned file descriptor, closed when its owner goes: for the cgroup library's objects
// that keep a file open across calls (OomKillCount's counter). Move-only. get() may be
// called from many threads at once; reset(), release() and moves from one thread while
// no other uses it (as the plain int it replaces).
#pragma once

#include <unistd.h>

namespace spawnpool::detail {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) reset(other.release());
    return *this;
  }

  int get() const { return fd_; }  ///< -1: none
  bool is_open() const { return fd_ >= 0; }
  /// Closes what it holds (a close error is not reported: nothing was written through
  /// it that a failed close could lose) and holds `fd` instead.
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace spawnpool::detail
