// Lives and deaths: cancelling commands, a spawner killed under its command (and its
// replacement), close() with commands running, the driver dying, and a spawner that
// keeps no fds or children from one command to the next.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <thread>

#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::string cmdline(int pid) {
  std::string text = read_file("/proc/" + std::to_string(pid) + "/cmdline");
  for (char& c : text)
    if (c == '\0') c = ' ';
  return text;
}

// The spawner (of `spawners`) whose command's command line contains `needle`, or -1.
int spawner_running(const std::vector<int>& spawners, const std::string& needle) {
  int found = -1;
  wait_until([&] {
    for (int spawner : spawners)
      for (int child : children_of(spawner))
        if (exe_name(child) != "spawnpool-spawner" &&
            cmdline(child).find(needle) != std::string::npos)
          found = spawner;
    return found > 0;
  });
  return found;
}

std::vector<std::string> fd_names(int pid) {
  std::vector<std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    out.push_back(entry.path().filename().string() + "->" +
                  std::filesystem::read_symlink(entry.path()).string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST_CASE("cancel sends the signal to the job's command", "[pool][cancel]") {
  const int sig = GENERATE(SIGTERM, SIGINT, SIGKILL);
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job job = pool.submit(helper_command("sleep_ms", {"30000"}));
    REQUIRE(command_of(pool.spawner_pids().at(0), "sleep_ms") > 0);
    const auto start = Clock::now();
    pool.cancel(job, sig);
    const Result r = pool.wait(job);
    CHECK(r.returncode == -sig);
    CHECK(Clock::now() - start < 10s);
    CHECK(pool.run(helper_command("exit_with", {"1"})).returncode == 1);
  }
  leaks.verify();
}

// The cancel races the launch: sent right after submit, it usually reaches the spawner
// before the command exists, and must still end that command (not be dropped, and not
// hit a later one).
TEST_CASE("a cancel sent before the command started still ends it", "[pool][cancel]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    for (int round = 0; round < 20; ++round) {
      Job job = pool.submit(helper_command("sleep_ms", {"30000"}));
      pool.cancel(job, SIGTERM);
      const auto start = Clock::now();
      CHECK(pool.wait(job).returncode == -SIGTERM);
      CHECK(Clock::now() - start < 10s);
    }
    CHECK(pool.run(helper_command("exit_with", {"3"})).returncode == 3);
  }
  leaks.verify();
}

TEST_CASE("cancel_all signals every running command", "[pool][cancel]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(2));
    Job a = pool.submit(helper_command("sleep_ms", {"30000"}));
    Job b = pool.submit(helper_command("sleep_ms", {"30000"}));
    for (int spawner : pool.spawner_pids()) REQUIRE(command_of(spawner, "sleep_ms") > 0);
    pool.cancel_all(SIGTERM);
    CHECK(pool.wait(a).returncode == -SIGTERM);
    CHECK(pool.wait(b).returncode == -SIGTERM);
  }
  leaks.verify();
}

TEST_CASE("cancelling a finished or empty job does nothing", "[pool][cancel]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job job = pool.submit(helper_command("exit_with", {"4"}));
    std::this_thread::sleep_for(200ms);
    pool.cancel(job, SIGKILL);
    pool.cancel_all(SIGKILL);
    CHECK(pool.wait(job).returncode == 4);
    pool.cancel(job, SIGKILL);   // waited for: no slot any more
    pool.cancel(Job{}, SIGKILL);  // never submitted
    CHECK(pool.run(helper_command("exit_with", {"5"})).returncode == 5);
  }
  leaks.verify();
}

TEST_CASE("a wait tick can interrupt a long command", "[pool][cancel]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job job = pool.submit(helper_command("sleep_ms", {"30000"}));
    int ticks = 0;
    // Asks again on every tick, so a first signal sent before the command ran is harmless.
    const Result r = pool.wait(job, [&] { return ++ticks >= 5 ? SIGUSR1 : 0; }, 50ms);
    CHECK(r.returncode == -SIGUSR1);
    CHECK(ticks >= 5);
  }
  leaks.verify();
}

TEST_CASE("a spawner killed under its command fails the command and is replaced",
          "[pool][crash]") {
  const OutputMode mode = GENERATE(OutputMode::kPassthrough, OutputMode::kCapture);
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const int spawner = pool.spawner_pids().at(0);
    Job job = pool.submit(helper_command("sleep_ms", {"30000"}, mode));
    const int command = command_of(spawner, "sleep_ms");
    REQUIRE(command > 0);
    const auto start = Clock::now();
    REQUIRE(kill(spawner, SIGKILL) == 0);
    const Result r = pool.wait(job);
    CHECK(Clock::now() - start < 10s);
    CHECK_FALSE(r.started());
    CHECK(r.failure == FailureStage::kSpawnerDied);
    CHECK(r.error_number == ECHILD);
    CHECK_THAT(r.error_message, Catch::Contains("spawner process " + std::to_string(spawner)) &&
                                    Catch::Contains("signal 9") &&
                                    Catch::Contains("sleep_ms"));
    // Its command was killed with it, not left to run as an orphan.
    CHECK(wait_until([&] { return process_gone(command); }));

    // The next command gets a new spawner.
    const Result next = pool.run(helper_command("exit_with", {"3"}));
    CHECK(next.returncode == 3);
    const std::vector<int> now = pool.spawner_pids();
    REQUIRE(now.size() == 1);
    CHECK(now[0] != spawner);
  }
  leaks.verify();
}

TEST_CASE("a spawner killed while idle is replaced for the next command", "[pool][crash]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(2));
    const std::vector<int> before = pool.spawner_pids();
    REQUIRE(kill(before.at(0), SIGKILL) == 0);
    CHECK(wait_until([&] { return pool.spawner_pids().size() == 1; }));
    for (int i = 0; i < 6; ++i) CHECK(pool.run(helper_command("exit_with", {"7"})).returncode == 7);
    // Both slots are in use at once: the dead one's must have been restarted.
    Job a = pool.submit(helper_command("sleep_ms", {"50"}));
    Job b = pool.submit(helper_command("sleep_ms", {"50"}));
    CHECK(pool.wait(a).returncode == 0);
    CHECK(pool.wait(b).returncode == 0);
    const std::vector<int> after = pool.spawner_pids();
    CHECK(after.size() == 2);
    CHECK(std::find(after.begin(), after.end(), before[0]) == after.end());
  }
  leaks.verify();
}

TEST_CASE("killing one spawner leaves the other slots' commands alone", "[pool][crash]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(2));
    Job victim = pool.submit(helper_command("sleep_ms", {"30000"}));
    Job bystander = pool.submit(helper_command("sleep_ms", {"1500"}));
    const int spawner = spawner_running(pool.spawner_pids(), "30000");
    REQUIRE(spawner > 0);
    REQUIRE(command_of(spawner, "sleep_ms") > 0);
    REQUIRE(kill(spawner, SIGKILL) == 0);
    CHECK(pool.wait(victim).failure == FailureStage::kSpawnerDied);
    CHECK(pool.wait(bystander).returncode == 0);
  }
  leaks.verify();
}

TEST_CASE("a spawner that cannot be restarted fails commands as data", "[pool][crash]") {
  LeakCheck leaks;
  {
    TempDir dir;
    const std::string copy = dir / "spawnpool-spawner";
    std::filesystem::copy_file(SPAWNPOOL_TEST_SPAWNER, copy);
    PoolOptions options = pool_options(1);
    options.spawner_path = copy;
    Pool pool(options);
    std::filesystem::remove(copy);
    const int spawner = pool.spawner_pids().at(0);
    REQUIRE(kill(spawner, SIGKILL) == 0);
    CHECK(wait_until([&] { return pool.spawner_pids().empty(); }));
    const Result r = pool.run(helper_command("exit_with", {"0"}));
    CHECK(r.failure == FailureStage::kSpawnerDied);
    CHECK(r.error_number == ECHILD);
    CHECK_THAT(r.error_message, Catch::Contains("no spawner"));
  }
  leaks.verify();
}

TEST_CASE("close with a command running returns promptly and kills it", "[pool][close]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(2));
    const std::vector<int> spawners = pool.spawner_pids();
    Result r;
    std::thread caller([&] { r = pool.run(helper_command("sleep_ms", {"30000"})); });
    const int spawner = spawner_running(spawners, "30000");
    REQUIRE(spawner > 0);
    const int command = command_of(spawner, "sleep_ms");
    REQUIRE(command > 0);
    const auto start = Clock::now();
    pool.close();
    caller.join();
    CHECK(Clock::now() - start < 5s);
    // The spawner kills its command as it exits; if it got to reply first, the caller
    // sees the kill, else the pool's closing.
    INFO(r.error_message);
    if (r.started()) {
      CHECK(r.returncode == -SIGKILL);
    } else {
      CHECK(r.failure == FailureStage::kPoolClosed);
      CHECK_THAT(r.error_message, Catch::Contains("closed"));
    }
    check_spawners_gone(spawners);
    CHECK(wait_until([&] { return process_gone(command); }));
  }
  leaks.verify();
}

// close() at every moment of a launch, the clone and exec included: the spawner must kill the
// command it is starting, not exit and leave it orphaned. The leak check finds orphans.
TEST_CASE("close during a launch leaves no command running", "[pool][close]") {
  LeakCheck leaks;
  {
    for (int delay_us = 0; delay_us <= 3000; delay_us += 50) {
      Pool pool(pool_options(1));
      Job job = pool.submit(helper_command("sleep_ms", {"30000"}));
      if (delay_us > 0) usleep(static_cast<useconds_t>(delay_us));
      pool.close();
      const Result r = pool.wait(job);
      CHECK(r.returncode != 0);  // killed, or never started
    }
  }
  leaks.verify();
}

TEST_CASE("spawners and their commands end when the driver dies", "[pool][driver-death]") {
  LeakCheck leaks;
  {
    int report[2];
    REQUIRE(pipe2(report, O_CLOEXEC) == 0);
    const pid_t driver = fork();
    REQUIRE(driver >= 0);
    if (driver == 0) {
      // A driver that dies without closing its pool. No Catch2 in here.
      close(report[0]);
      int pids[2] = {-1, -1};
      {
        auto* pool = new Pool(pool_options(1));  // leaked on purpose: no close()
        pids[0] = pool->spawner_pids().at(0);
        static Job job;
        job = pool->submit(helper_command("sleep_ms", {"30000"}));
        pids[1] = command_of(pids[0], "sleep_ms");
      }
      (void)!write(report[1], pids, sizeof pids);
      _exit(0);
    }
    close(report[1]);
    int pids[2] = {-1, -1};
    const ssize_t n = read(report[0], pids, sizeof pids);
    close(report[0]);
    int status = 0;
    REQUIRE(waitpid(driver, &status, 0) == driver);
    REQUIRE(n == sizeof pids);
    REQUIRE(pids[0] > 0);
    REQUIRE(pids[1] > 0);
    CHECK(wait_until([&] { return process_gone(pids[0]); }));
    CHECK(wait_until([&] { return process_gone(pids[1]); }));
  }
  leaks.verify();
}

TEST_CASE("a spawner keeps no fds or children from one command to the next",
          "[pool][steady]") {
  LeakCheck leaks;
  {
    TempDir dir;
    Pool pool(pool_options(1));
    const int spawner = pool.spawner_pids().at(0);
    REQUIRE(pool.run(helper_command("write_streams", {"out:x"})).returncode == 0);
    const auto fds = fd_names(spawner);
    const std::string status_path = "/proc/" + std::to_string(spawner) + "/status";
    auto threads = [&] {
      const std::string status = read_file(status_path);
      return std::atoi(status.c_str() + status.find("Threads:") + 8);
    };
    const int thread_count = threads();
    for (int i = 0; i < 20; ++i) {
      pool.run(helper_command("print_bytes", {"100000", "100000"}));
      pool.run(helper_command("write_streams", {"out:a", "err:b"}, OutputMode::kCaptureMerged));
      pool.run(helper_command("exit_with", {"1"}, OutputMode::kPassthrough));
      pool.run(helper_command("kill_self", {std::to_string(SIGTERM)}));
      Command missing = helper_command("exit_with");
      missing.argv[0] = dir / "missing";
      CHECK(pool.run(missing).failure == FailureStage::kExec);
      Command bad_cwd = helper_command("exit_with");
      bad_cwd.cwd = dir / "missing";
      CHECK(pool.run(bad_cwd).failure == FailureStage::kChdir);
    }
    CHECK(fd_names(spawner) == fds);
    CHECK(children_of(spawner).empty());
    CHECK(threads() == thread_count);
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
