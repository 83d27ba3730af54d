// The build statistics (engine/src/stack/build_statistics.h) and the layer that feeds
// them (stats_layer.h). The expected report texts were printed by
// engine/python/spawnpool/stats.py (Stats.report) for the same results: the C++ report
// must be the same text, byte for byte, as scripts and tests parse it.
#include <catch2/catch.hpp>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include "engine/src/stack/build_statistics.h"
#include "engine/src/stack/stats_layer.h"

namespace spawnpool::test {
namespace {

using detail::BuildStatistics;
using detail::PreparedCommand;
using detail::StatsLayer;

constexpr std::int64_t kMs = 1000000;

// A base that hands back the results it was given, in order.
class ScriptedLayer : public detail::Layer {
 public:
  explicit ScriptedLayer(std::deque<Result> results) : results_(std::move(results)) {}
  Result run(PreparedCommand&) override {
    Result result = results_.front();
    results_.pop_front();
    return result;
  }

 private:
  std::deque<Result> results_;
};

std::vector<std::pair<Result, std::string>> twelve_compiles_and_an_unstarted() {
  std::vector<std::pair<Result, std::string>> out;
  for (int i = 0; i < 12; ++i) {
    const std::int64_t base = 1000 * kMs + i * 10 * kMs;
    Result r;
    r.submitted_ns = base;
    r.dispatched_ns = base + kMs;
    r.launch_ns = base + kMs + 20000;
    r.started_ns = base + kMs + 90000;
    r.exited_ns = base + kMs + 20000 + (i % 5 + 1) * 3 * kMs + i * 1111;
    r.completed_ns = r.exited_ns + 35000;
    r.returncode = i == 3 ? 1 : 0;
    out.emplace_back(r, i == 7 ? "cc -c file7.c\n-o x" : "cc -c file" + std::to_string(i) + ".c");
  }
  Result unstarted;
  unstarted.failure = FailureStage::kExec;
  unstarted.completed_ns = 1000 * kMs + 200 * kMs;
  out.emplace_back(unstarted, "nosuch");
  return out;
}

TEST_CASE("statistics report: the text stats.py writes, longest commands first") {
  BuildStatistics statistics(2);
  for (const auto& [result, line] : twelve_compiles_and_an_unstarted()) statistics.add(result, line);
  CHECK(statistics.report() ==
        "spawnpool: statistics\n"
        "  commands:           13 run, 2 failed (1 did not start)\n"
        "  command time:       total 0.099 s, mean 8.256 ms\n"
        "  pool overhead:      mean 0.055 ms per command (slot to launch + reap to result)\n"
        "  queue wait:         mean 1.000 ms per command, total 0.012 s\n"
        "  slot utilization:   24.8% (2 slots, 0.200 s from first submit to last result)\n"
        "  longest commands:\n"
        "        0.015 s  cc -c file9.c\n"
        "        0.015 s  cc -c file4.c\n"
        "        0.012 s  cc -c file8.c\n"
        "        0.012 s  cc -c file3.c\n"
        "        0.009 s  cc -c file7.c -o x\n"
        "        0.009 s  cc -c file2.c\n"
        "        0.006 s  cc -c file11.c\n"
        "        0.006 s  cc -c file6.c\n"
        "        0.006 s  cc -c file1.c\n"
        "        0.003 s  cc -c file10.c\n");
  const detail::StatisticsTotals totals = statistics.totals();
  CHECK(totals.slots == 2);
  CHECK((totals.commands == 13 && totals.failed == 2 && totals.unstarted == 1));
  CHECK(totals.queue_ns == 12 * kMs);
  CHECK(totals.build_wall_s == Approx(0.2));
  CHECK(totals.utilization == Approx(static_cast<double>(totals.command_ns) / 1e9 / (2 * 0.2)));
}

TEST_CASE("statistics report: memory admission's lines, prediction error quantiles") {
  BuildStatistics statistics(1);
  struct Memory {
    std::int64_t predicted_mib, peak_mib, wait_ns;
  };
  const Memory memory[] = {{100, 80, 0}, {50, 100, 5 * kMs}, {300, 100, 0}};
  for (int i = 0; i < 3; ++i) {
    Result r;
    r.returncode = 0;
    r.submitted_ns = i * kMs;
    r.dispatched_ns = i * kMs + memory[i].wait_ns;
    r.started_ns = r.dispatched_ns + 1000;
    r.exited_ns = r.dispatched_ns + 2 * kMs;
    r.completed_ns = r.exited_ns + 500;
    r.predicted_peak_bytes = memory[i].predicted_mib << 20;
    r.peak_memory_bytes = memory[i].peak_mib << 20;
    r.memory_wait_ns = memory[i].wait_ns;
    r.memory_source = MemorySource::kCgroup;
    r.oom_retries = i == 2 ? 1 : 0;
    r.oom_killed = i == 2;
    statistics.add(r, i == 1 ? std::string(200, 'x') : "ld -o app");
  }
  CHECK(statistics.prediction_error(0.5) == 50);
  CHECK(statistics.prediction_error(0.9) == 200);
  CHECK(statistics.report("scons") ==
        "scons: statistics\n"
        "  commands:           3 run, 0 failed\n"
        "  command time:       total 0.006 s, mean 1.999 ms\n"
        "  pool overhead:      mean 0.002 ms per command (slot to launch + reap to result)\n"
        "  queue wait:         mean 1.667 ms per command, total 0.005 s\n"
        "  slot utilization:   75.0% (1 slots, 0.008 s from first submit to last result)\n"
        "  memory measured by: cgroup per command\n"
        "  delayed for memory: 1 commands, 0.005 s in all\n"
        "  OOM retries:        1 (1 killed again when run alone)\n"
        "  prediction error:   p50 50%, p90 200% of the measured peak (3 commands, 1 "
        "under-predicted)\n"
        "  longest commands:\n"
        "        0.002 s  ld -o app\n"
        "        0.002 s  " + std::string(157, 'x') + "...\n"
        "        0.002 s  ld -o app\n");
}

TEST_CASE("statistics: an empty build reports no means and no longest list") {
  BuildStatistics statistics;
  CHECK(!statistics.prediction_error(0.5));
  CHECK(statistics.report() ==
        "spawnpool: statistics\n"
        "  commands:           0 run, 0 failed\n"
        "  command time:       total 0.000 s, mean -\n"
        "  pool overhead:      mean - per command (slot to launch + reap to result)\n"
        "  queue wait:         mean - per command, total 0.000 s\n"
        "  slot utilization:   0.0% (0 slots, 0.000 s from first submit to last result)\n");
  statistics.note_slots(4);
  statistics.note_slots(2);
  CHECK(statistics.report().find("(4 slots,") != std::string::npos);
}

TEST_CASE("stats layer: every result, a failing one too, is recorded and handed up unchanged") {
  std::deque<Result> results;
  Result ok;
  ok.returncode = 0;
  ok.started_ns = 10;
  ok.exited_ns = 3 * kMs + 10;
  ok.completed_ns = 3 * kMs + 20;
  Result failed = ok;
  failed.returncode = 2;
  Result unstarted;
  unstarted.failure = FailureStage::kPoolClosed;
  unstarted.completed_ns = 5;
  results = {ok, failed, unstarted};
  ScriptedLayer base(results);
  BuildStatistics statistics(1);
  StatsLayer layer(base, statistics);
  PreparedCommand command;
  command.line = "make-it";
  CHECK(layer.run(command).returncode == 0);
  CHECK(layer.run(command).returncode == 2);
  CHECK(layer.run(command).failure == FailureStage::kPoolClosed);
  const std::string report = statistics.report();
  CHECK(report.find("  commands:           3 run, 2 failed (1 did not start)\n") !=
        std::string::npos);
  CHECK(report.find("        0.003 s  make-it\n") != std::string::npos);
  REQUIRE(statistics.longest().size() == 2);
}

TEST_CASE("statistics: results added from many threads are all counted") {
  BuildStatistics statistics(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&statistics, t] {
      for (int i = 0; i < 500; ++i) {
        Result r;
        r.returncode = 0;
        r.started_ns = 1;
        r.exited_ns = 1 + (t * 500 + i) * 1000;
        r.completed_ns = r.exited_ns;
        statistics.add(r, "t" + std::to_string(t));
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(statistics.report().find("  commands:           2000 run, 0 failed\n") !=
        std::string::npos);
  const auto longest = statistics.longest();
  REQUIRE(longest.size() == 10);
  CHECK(longest.front().second == "t3");
  CHECK(longest.front().first == Approx(1999e3 / 1e9));
}

}  // namespace
}  // namespace spawnpool::test
