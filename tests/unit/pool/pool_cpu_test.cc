// The same-CPU hand-off's give-backs through a real pool, in a forked copy of the test
// process under a seccomp filter that refuses every thread sched_setaffinity on itself
// (a sandbox's policy; pins of another thread still go through): the spawner and the
// waiting driver thread cannot give their own sets back after a pin. The command still
// runs on every CPU (the spawner widens it from outside), the spawner gets its set back
// from the driver, the pool says so once and gives no more hints.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "spawnpool/pool.h"
#include "tests/unit/support/cpu_test_support.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_skip.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

// "Cpus_allowed_list:\t0-1" of /proc/PID/status, as child_state would print it.
std::string allowed_cpus_of(int pid) {
  std::istringstream status(read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(status, line);)
    if (line.rfind("Cpus_allowed_list:", 0) == 0) {
      std::string list = line.substr(line.find('\t') + 1);
      // "0-3" as "0,1,2,3": child_state lists every CPU.
      std::string out;
      std::istringstream ranges(list);
      for (std::string range; std::getline(ranges, range, ',');) {
        const auto dash = range.find('-');
        const int first = std::stoi(range.substr(0, dash));
        const int last = dash == std::string::npos ? first : std::stoi(range.substr(dash + 1));
        for (int cpu = first; cpu <= last; ++cpu) out += (out.empty() ? "" : ",") + std::to_string(cpu);
      }
      return out;
    }
  return "?";
}

// The forked copy: runs commands through a pool with the hint on, writes one line per
// fact to `out_fd`. Exit 3: no filter here; 2: the pool failed.
int run_pool_under_the_policy(int out_fd) {
  if (!refuse_sched_setaffinity(Refused::kOnItself)) return 3;
  std::mutex mutex;
  std::vector<std::string> warnings;
  std::ostringstream out;
  try {
    PoolOptions options = pool_options(1);
    options.same_cpu_handoff = true;
    options.warn = [&](const std::string& message) {
      std::lock_guard<std::mutex> lock(mutex);
      warnings.push_back(message);
    };
    Pool pool(options);
    const int spawner = pool.spawner_pids().at(0);
    // The spawner widens each command's set from outside just after its start: the
    // command waits for that before it prints its set (a loaded machine showed the
    // command looking first, "1" for "0,1").
    const std::string every_count = std::to_string(detail::CpuSet::of_calling_thread().count());
    for (int i = 0; i < 5; ++i) {
      const Result r = pool.run(helper_command("child_state", {"--wait-for-cpus", every_count}));
      std::istringstream lines(r.stdout_data);
      std::string cpus = "?";
      for (std::string line; std::getline(lines, line);)
        if (line.rfind("cpus=", 0) == 0) cpus = line.substr(5);
      out << "command " << r.returncode << " " << cpus << "\n";
    }
    out << "spawner " << allowed_cpus_of(spawner) << "\n";
  } catch (const std::exception&) {
    return 2;
  }
  out << "warnings " << warnings.size() << "\n";
  for (const auto& w : warnings) out << "warning " << w << "\n";
  const std::string text = out.str();
  return write(out_fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : 2;
}

TEST_CASE("CPU sets a policy will not give back after a hand-off are put back and said once",
          "[pool][cpu]") {
  const detail::CpuSet own = detail::CpuSet::of_calling_thread();
  REQUIRE_FALSE(own.empty());
  TEST_SKIP_UNLESS(own.count() >= 2, "one CPU only: a pin is the whole set");
  LeakCheck leaks;
  const ForkedCopy copy = run_in_forked_copy(run_pool_under_the_policy);
  REQUIRE(WIFEXITED(copy.status));
  TEST_SKIP_UNLESS(WEXITSTATUS(copy.status) != 3, "no seccomp filter could be installed here");
  REQUIRE(WEXITSTATUS(copy.status) == 0);
  const std::string& report = copy.output;
  INFO(report);
  const std::string every = cpu_list(own);
  std::istringstream lines(report);
  int commands = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("command ", 0) == 0) {
      ++commands;
      CHECK(line == "command 0 " + every);  // never on the pinned CPU
    }
    if (line.rfind("spawner ", 0) == 0) CHECK(line == "spawner " + every);
  }
  CHECK(commands == 5);
  CHECK(report.find("warnings 1\n") != std::string::npos);
  CHECK(report.find("warning same-CPU hand-off: ") != std::string::npos);
  CHECK(report.find("the hand-off hint is off for this pool") != std::string::npos);
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
