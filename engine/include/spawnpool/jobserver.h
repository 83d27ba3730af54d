// A GNU make jobserver client: one process's share of make's job slots. A `make -jN`
// passes its jobserver to recipes in MAKEFLAGS (--jobserver-auth=fifo:PATH from make 4.4,
// --jobserver-auth=R,W from 4.2, --jobserver-fds=R,W before); the pipe holds N-1 one-byte
// tokens. As make's manual asks: the first running command uses the process's implicit
// slot and needs no token, each further one takes a token first, and every token goes
// back (the same byte) when its command ends, fails to start, is cancelled, and when the
// pool closes. The pool's Scheduler is its only taker (PoolOptions::jobserver): a command
// gets its token together with its slot and its memory, never one while it waits for
// another. Reads are non-blocking on a private open file description (make's own fd
// keeps its flags); nobody sleeps in read(2). Thread-safe: one mutex; no method blocks.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace spawnpool {

class Jobserver {
 public:
  /// The client for the jobserver MAKEFLAGS names, or nullptr when it names none. One
  /// that names one this process cannot use (make 4.3 closes R,W for a recipe line
  /// without '+' or $(MAKE); a malformed option; not a pipe) is returned unusable: then
  /// only the implicit slot exists, one command at a time, as make's "jobserver
  /// unavailable: using -j1"; problem() and hint() say why. Open it early: the R,W fds
  /// it names may be reused by the process later.
  static std::shared_ptr<Jobserver> from_makeflags(const std::string& makeflags);
  /// from_makeflags(getenv("MAKEFLAGS")).
  static std::shared_ptr<Jobserver> from_environment();
  ~Jobserver();  ///< gives make back every token still held, closes its descriptors
  Jobserver(const Jobserver&) = delete;
  Jobserver& operator=(const Jobserver&) = delete;

  bool usable() const { return read_fd_ >= 0; }
  /// Why it is unusable ("make's jobserver (fds 3,4 in MAKEFLAGS) is unavailable: ..."),
  /// and what to do about it; empty when usable (hint: also when nothing helps).
  const std::string& problem() const { return problem_; }
  const std::string& hint() const { return hint_; }
  /// True the first time only: whoever gets it says problem() (one warning per build,
  /// whether the pool or its embedder says it).
  bool claim_warning() { return !warned_.exchange(true); }
  /// Makes the inherited R,W close-on-exec, so commands started elsewhere in the process
  /// get no job slots of their own (the spawners close every fd >= 3 anyway).
  void keep_from_commands();

  /// A job slot now: the implicit one if free, else a token read from make; false when
  /// neither is there (never blocks). Each true is followed by one release().
  bool try_acquire();
  /// Gives back one slot: a token held (the byte read), else the implicit slot.
  void release();
  /// Gives every held token back now (a build that ends, or is interrupted, before its
  /// commands have all come back). Releases of commands that still run then give back
  /// nothing; try_acquire() still gives the implicit slot. Idempotent.
  void return_all();
  /// The descriptor that polls readable when a token may be there; -1 when unusable.
  int poll_fd() const { return read_fd_; }

  std::size_t tokens_held() const;
  /// The most commands this client let run at once.
  std::size_t max_running() const;

 private:
  Jobserver() = default;
  void open_pipe(int r, int w);
  void open_fifo(const std::string& path);
  void write_token(char token);

  int inherited_read_ = -1, inherited_write_ = -1;  // make's R,W (pipe style); -1: none
  int read_fd_ = -1;   // private, O_NONBLOCK; -1: unusable
  int write_fd_ = -1;
  std::string problem_, hint_;
  std::atomic<bool> warned_{false};
  mutable std::mutex mutex_;
  bool implicit_free_ = true;
  std::vector<char> tokens_;    // read from make and not given back, last in first out
  std::size_t returned_early_ = 0;  // tokens return_all() gave back for running commands
  std::size_t running_ = 0;
  std::size_t max_running_ = 0;
};

}  // namespace spawnpool
