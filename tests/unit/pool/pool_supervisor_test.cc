// The supervisor's state is per slot: while one slot's replacement spawner is starting
// (slowed here to 2 s by a wrapper script around the real spawner), commands on the
// other slot keep their usual latency, and a cancel of them returns at once. Before the
// state was per slot, one mutex, held during the whole attach, stalled both. Generous
// bounds: a command here takes ~200 ms; a stall would be ~2 s.
#include <signal.h>
#include <sys/stat.h>

#include <array>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

constexpr auto kRestartDelay = 2s;  // how long a replacement takes to attach
constexpr auto kBound = 1s;         // a command on another slot takes less, stalls more

// A spawner that starts late once `flag` exists: every replacement is slow, the pool's
// first spawners are not.
std::string write_slow_spawner(const TempDir& dir, const std::string& flag) {
  const std::string path = dir / "slow_spawner";
  std::ofstream(path) << "#!/bin/sh\n"
                      << "[ -e '" << flag << "' ] && sleep "
                      << std::chrono::seconds(kRestartDelay).count() << "\n"
                      << "exec '" << SPAWNPOOL_TEST_SPAWNER << "' \"$@\"\n";
  chmod(path.c_str(), 0755);
  return path;
}

struct Sample {
  int slot;
  int round_at_start, round_at_end;  // the kill round when submitted and when done
  Clock::duration latency;
  bool ran;
};

TEST_CASE("a spawner being replaced stalls no other slot", "[pool][supervisor]") {
  constexpr int kRounds = 3;
  LeakCheck leaks;
  TempDir dir;
  const std::string flag = dir / "slow";
  PoolOptions options = pool_options(2);
  options.spawner_path = write_slow_spawner(dir, flag);
  options.start_timeout = 20s;
  std::vector<Sample> samples;
  std::vector<Clock::duration> cancel_times;
  std::array<int, kRounds> killed_slot{};
  {
    Pool pool(options);
    std::ofstream(flag) << "";
    std::atomic<bool> stop{false};
    std::atomic<int> round{-1};
    std::mutex samples_mutex;
    // Two runners on two slots: each keeps one slot busy with ~200 ms commands.
    std::vector<std::thread> runners;
    for (int r = 0; r < 2; ++r)
      runners.emplace_back([&] {
        while (!stop) {
          const int at_start = round;
          const auto begin = Clock::now();
          const Result result = pool.run(helper_command("sleep_ms", {"200"}));
          const Sample sample{result.slot, at_start, round, Clock::now() - begin,
                              result.started()};
          std::lock_guard<std::mutex> lock(samples_mutex);
          samples.push_back(sample);
        }
      });
    std::this_thread::sleep_for(500ms);
    for (int k = 0; k < kRounds; ++k) {
      const std::vector<int> spawners = pool.spawner_pids();  // in slot order, all alive
      REQUIRE(spawners.size() == 2);
      killed_slot[k] = k % 2;
      round = k;
      kill(spawners[killed_slot[k]], SIGKILL);
      // While the replacement starts: a cancel of the other slot's command (SIGCONT
      // does it no harm) must not wait for that start.
      std::this_thread::sleep_for(500ms);
      const auto begin = Clock::now();
      pool.cancel_all(SIGCONT);
      cancel_times.push_back(Clock::now() - begin);
      std::this_thread::sleep_for(kRestartDelay + 1s);
    }
    stop = true;
    for (auto& t : runners) t.join();
    std::remove(flag.c_str());
  }
  leaks.verify();

  int judged = 0, restart_waits = 0;
  for (const Sample& s : samples) {
    if (s.round_at_start != s.round_at_end || s.round_at_start < 0) continue;
    if (s.slot == killed_slot[s.round_at_start]) {
      // The slot being replaced: its next command waits for the replacement.
      if (s.latency >= kRestartDelay - 500ms) ++restart_waits;
      continue;
    }
    ++judged;
    INFO("slot " << s.slot << " in round " << s.round_at_start << ": "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(s.latency).count()
                 << " ms");
    CHECK(s.ran);
    CHECK(s.latency < kBound);
  }
  CHECK(restart_waits >= kRounds);  // the replacements really were slow
  CHECK(judged >= kRounds * 5);     // and the other slot really ran meanwhile
  for (const auto& t : cancel_times) CHECK(t < kBound);
}

}  // namespace
}  // namespace spawnpool::test
