#include "spawnpool/jobserver.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "engine/src/jobserver/makeflags.h"

namespace spawnpool {
namespace {

using detail::JobserverAuth;

// Why an inherited descriptor or the fifo cannot serve: the sentence's tail.
struct Unusable : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail_errno() { throw Unusable(std::strerror(errno)); }

void check_pipe_end(int fd, int want) {
  struct stat st {};
  if (fstat(fd, &st) != 0) fail_errno();
  if (!S_ISFIFO(st.st_mode)) throw Unusable("fd " + std::to_string(fd) + " is not a pipe");
  const int flags = fcntl(fd, F_GETFL);
  if (flags < 0) fail_errno();
  const int mode = flags & O_ACCMODE;
  if (mode != want && mode != O_RDWR)
    throw Unusable("fd " + std::to_string(fd) + " is not open for " +
                   (want == O_RDONLY ? "reading" : "writing"));
}

ino_t inode_of(int fd) {
  struct stat st {};
  if (fstat(fd, &st) != 0) fail_errno();
  return st.st_ino;
}

// Our own open file description of the pipe behind `fd`: make's keeps its flags.
int reopen(const std::string& path, int flags) {
  const int fd = open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) fail_errno();
  return fd;
}

}  // namespace

std::shared_ptr<Jobserver> Jobserver::from_environment() {
  const char* makeflags = std::getenv("MAKEFLAGS");
  return from_makeflags(makeflags ? makeflags : "");
}

std::shared_ptr<Jobserver> Jobserver::from_makeflags(const std::string& makeflags) {
  const JobserverAuth auth = detail::parse_makeflags(makeflags);
  if (auth.style == JobserverAuth::Style::kNone) return nullptr;
  std::shared_ptr<Jobserver> client(new Jobserver());
  const std::string where = auth.style == JobserverAuth::Style::kFifo
                                ? "fifo " + auth.text
                                : "fds " + std::to_string(auth.read_fd) + "," +
                                      std::to_string(auth.write_fd);
  try {
    switch (auth.style) {
      case JobserverAuth::Style::kPipe: client->open_pipe(auth.read_fd, auth.write_fd); break;
      case JobserverAuth::Style::kFifo: client->open_fifo(auth.text); break;
      default:
        client->problem_ = "cannot parse the jobserver option '" + auth.text + "' in MAKEFLAGS";
    }
  } catch (const Unusable& why) {
    client->problem_ = "make's jobserver (" + where + " in MAKEFLAGS) is unavailable: " +
                       why.what();
    if (auth.style == JobserverAuth::Style::kPipe)
      client->hint_ = "make passes its jobserver only to recursive recipe lines: "
                      "start the line with '+' or use $(MAKE) in it";
  }
  return client;
}

void Jobserver::open_pipe(int r, int w) {
  check_pipe_end(r, O_RDONLY);
  check_pipe_end(w, O_WRONLY);
  if (inode_of(r) != inode_of(w))
    throw Unusable("fds " + std::to_string(r) + " and " + std::to_string(w) +
                   " are not the same pipe");
  read_fd_ = reopen("/proc/self/fd/" + std::to_string(r), O_RDONLY | O_NONBLOCK);
  try {
    write_fd_ = reopen("/proc/self/fd/" + std::to_string(w), O_WRONLY);
  } catch (...) {
    close(read_fd_);
    read_fd_ = -1;
    throw;
  }
  inherited_read_ = r;
  inherited_write_ = w;
}

void Jobserver::open_fifo(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) fail_errno();
  if (!S_ISFIFO(st.st_mode)) throw Unusable(path + " is not a fifo");
  read_fd_ = reopen(path, O_RDONLY | O_NONBLOCK);
  try {
    write_fd_ = reopen(path, O_WRONLY);  // a reader exists (ours): this does not block
  } catch (...) {
    close(read_fd_);
    read_fd_ = -1;
    throw;
  }
}

Jobserver::~Jobserver() {
  return_all();
  if (read_fd_ >= 0) close(read_fd_);
  if (write_fd_ >= 0) close(write_fd_);
}

void Jobserver::keep_from_commands() {
  for (const int fd : {inherited_read_, inherited_write_}) {
    if (fd < 0) continue;
    const int flags = fcntl(fd, F_GETFD);
    if (flags >= 0) fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
  }
}

bool Jobserver::try_acquire() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (implicit_free_) {
    implicit_free_ = false;
  } else {
    char token = 0;
    // EAGAIN: none there, or another process took it between a poll and this read.
    if (read_fd_ < 0 || read(read_fd_, &token, 1) != 1) return false;
    tokens_.push_back(token);
  }
  if (++running_ > max_running_) max_running_ = running_;
  return true;
}

void Jobserver::release() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (running_ > 0) --running_;
  if (!tokens_.empty()) {
    write_token(tokens_.back());
    tokens_.pop_back();
  } else if (returned_early_ > 0) {
    --returned_early_;  // its token went back in return_all()
  } else {
    implicit_free_ = true;
  }
}

void Jobserver::return_all() {
  std::lock_guard<std::mutex> lock(mutex_);
  returned_early_ += tokens_.size();
  while (!tokens_.empty()) {
    write_token(tokens_.back());
    tokens_.pop_back();
  }
}

// A pipe has room for every token make made (N-1 < PIPE_BUF), so this write does not
// wait; a write that fails (make is gone) loses a token nobody needs any more.
void Jobserver::write_token(char token) {
  if (write_fd_ < 0) return;
  while (write(write_fd_, &token, 1) < 0 && errno == EINTR) {
  }
}

std::size_t Jobserver::tokens_held() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tokens_.size();
}

std::size_t Jobserver::max_running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return max_running_;
}

}  // namespace spawnpool
