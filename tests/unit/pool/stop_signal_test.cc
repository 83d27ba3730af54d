// The pool's stop latch (engine/src/pool/stop_signal.h): a stop signal taken from the
// driver's wake-up pipe, or an interrupt, is seen by every thread that asks afterwards;
// and a stop signal one of the pool's spawners took stops the pool too when it has a
// stop fd. Before, the thread that read the signal's byte was the only one to see it,
// and nothing looked at the spawners: under load a command dispatched on a slot the
// Ctrl-C freed started after it (tests/distributed/test_make_jobserver.py).
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <sstream>
#include <thread>
#include <vector>

#include "engine/src/pool/stop_signal.h"
#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

using detail::StopLatch;
using namespace std::chrono_literals;

// A non-blocking pipe, as Python's signal.set_wakeup_fd() wants it; closed at the end.
struct WakeupPipe {
  int fds[2] = {-1, -1};
  WakeupPipe() {
    REQUIRE(pipe2(fds, O_NONBLOCK | O_CLOEXEC) == 0);
  }
  ~WakeupPipe() {
    close(fds[0]);
    close(fds[1]);
  }
  void put(int sig) const {
    const unsigned char byte = static_cast<unsigned char>(sig);
    REQUIRE(write(fds[1], &byte, 1) == 1);
  }
};

TEST_CASE("a stop signal one thread read from the pipe stops every thread that asks later",
          "[pool][stop]") {
  WakeupPipe pipe;
  StopLatch latch(pipe.fds[0]);
  CHECK(latch.check() == 0);
  pipe.put(SIGINT);
  constexpr int kThreads = 8;
  std::vector<int> seen(kThreads, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back([&, i] { seen[i] = latch.check(); });
  for (std::thread& t : threads) t.join();
  for (const int sig : seen) CHECK(sig == SIGINT);
  CHECK(latch.check() == SIGINT);
}

TEST_CASE("the stop latch ignores other signals' bytes and keeps the first stop",
          "[pool][stop]") {
  WakeupPipe pipe;
  StopLatch latch(pipe.fds[0]);
  pipe.put(SIGUSR1);
  pipe.put(SIGCHLD);
  CHECK(latch.check() == 0);
  pipe.put(SIGTERM);
  CHECK(latch.check() == SIGTERM);
  pipe.put(SIGINT);
  latch.note(SIGHUP);
  CHECK(latch.check() == SIGTERM);
}

TEST_CASE("an interrupt stops the latch without a pipe, and a signal number <= 0 does not",
          "[pool][stop]") {
  StopLatch latch(-1);
  latch.note(0);
  latch.note(-3);
  CHECK(latch.check() == 0);
  latch.note(SIGINT);
  CHECK(latch.check() == SIGINT);
}

TEST_CASE("a stop signal pending for the process is seen before the pipe is read",
          "[pool][stop]") {
  WakeupPipe pipe;
  StopLatch latch(pipe.fds[0]);
  sigset_t hup, old;
  sigemptyset(&hup);
  sigaddset(&hup, SIGHUP);
  REQUIRE(pthread_sigmask(SIG_BLOCK, &hup, &old) == 0);
  REQUIRE(kill(getpid(), SIGHUP) == 0);  // blocked: stays pending
  const int seen = latch.check();
  const timespec now{0, 0};
  siginfo_t info;
  const int taken = sigtimedwait(&hup, &info, &now);  // take it back before unblocking
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  CHECK(taken == SIGHUP);
  CHECK(seen == SIGHUP);
}

// The signals pending for process `pid` as a whole (/proc's ShdPnd mask); ~0 if unread.
unsigned long long shared_pending(int pid) {
  std::istringstream lines(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("ShdPnd:", 0) == 0) return std::stoull(line.substr(7), nullptr, 16);
  return ~0ull;
}

// A SIGINT sent to one spawner alone (a Ctrl-C reaches the driver's whole process
// group), with no byte in the driver's pipe: its handler has not run yet.
Result run_after_a_spawner_took_sigint(bool with_stop_fd) {
  WakeupPipe pipe;
  PoolOptions options = pool_options(2);
  if (with_stop_fd) options.stop_signal_fd = pipe.fds[0];
  Pool pool(options);
  REQUIRE(pool.run(helper_command("exit_with", {"3"})).returncode == 3);
  const int spawner = pool.spawner_pids().at(1);
  REQUIRE(kill(spawner, SIGINT) == 0);
  // Read from its signalfd by the watch thread, which notes it right after.
  REQUIRE(wait_until([&] { return shared_pending(spawner) == 0; }));
  std::this_thread::sleep_for(50ms);
  return pool.run(helper_command("exit_with", {"3"}));
}

TEST_CASE("with a stop fd, a stop signal a spawner took starts nothing more",
          "[pool][stop]") {
  LeakCheck leaks;
  const Result r = run_after_a_spawner_took_sigint(true);
  CHECK(r.returncode == -SIGINT);
  CHECK(r.slot == -1);  // no spawner ran it
  leaks.verify();
}

TEST_CASE("without a stop fd, a spawner's signal stops nothing", "[pool][stop]") {
  LeakCheck leaks;
  CHECK(run_after_a_spawner_took_sigint(false).returncode == 3);
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
