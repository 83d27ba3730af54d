// Memory-aware admission through the real Pool, each case under a cgroup of its own
// (cgroup_test_support.h: removed whatever happens, skipped with the reason where no
// hierarchy is writable): a command runs in its slot's cgroup and is measured there;
// cancel and close reach a process that left the command's group and session; an
// OOM-killed command runs again alone and succeeds when it fits alone, or fails with the
// message when it never does, and an interrupted build does not run it again; the forced
// no-cgroup fallback; the history across pools;
// a pool without a budget makes no cgroup; nothing is left behind.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "spawnpool/pool.h"
#include "tests/unit/support/cgroup_test_support.h"
#include "tests/unit/support/test_support.h"
#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::test {
namespace {

using namespace std::chrono_literals;
constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// Collects the pool's warnings (from any thread).
struct Warnings {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard<std::mutex> lock(mutex);
      lines.push_back(line);
    };
  }
  std::vector<std::string> taken() {
    std::lock_guard<std::mutex> lock(mutex);
    return lines;
  }
};

PoolOptions memory_options(std::size_t slots, const std::string& parent, Warnings& warnings,
                           MemoryBudget budget = MemoryBudget::of_bytes(std::uint64_t{4} << 30)) {
  PoolOptions options = pool_options(slots);
  options.memory_budget = budget;
  options.memory_cgroup_parent = parent;
  options.warn = warnings.sink();
  return options;
}

Command shell(const std::string& line) {
  Command command;
  command.argv = {"/bin/sh", "-c", line};
  command.output = OutputMode::kCapture;
  return command;
}

// The pid a command wrote to `path`, once it has (0 if it never did).
pid_t pid_in(const std::string& path) {
  pid_t pid = 0;
  wait_until([&] {
    std::ifstream(path) >> pid;
    return pid > 0;
  });
  return pid;
}

// The cgroup's limit: v1 memory.limit_in_bytes; v2 memory.max, and no swap.
bool limit_memory(const TestCgroup& cgroup, std::int64_t bytes) {
  const bool v1 = cgroup.version() == detail::CgroupVersion::kV1;
  const std::string dir = cgroup.dir();
  if (!detail::write_file_text(dir + (v1 ? "/memory.limit_in_bytes" : "/memory.max"),
                               std::to_string(bytes)))
    return false;
  if (!v1) detail::write_file_text(dir + "/memory.swap.max", "0");  // where swap is on
  return true;
}

// Whether the kernel has a peak file: v1 always, v2 from 5.19 (memory.peak); before,
// a command cgroup's memory.current is sampled.
bool has_peak_file(const TestCgroup& cgroup) {
  return cgroup.version() == detail::CgroupVersion::kV1 ||
         access((cgroup.dir() + "/memory.peak").c_str(), F_OK) == 0;
}

TEST_CASE("a command runs in its slot's cgroup and is measured there", "[pool][memory]") {
  with_test_cgroup(false, [](const TestCgroup& cgroup) {
    Warnings warnings;
    Pool pool(memory_options(2, cgroup.dir(), warnings));
    const std::vector<std::string> pools = child_cgroups(cgroup.dir());
    REQUIRE(pools.size() == 1);
    CHECK(pools[0].rfind("spawnpool-" + std::to_string(getpid()) + "-", 0) == 0);
    const Result r = pool.run(shell("cat /proc/self/cgroup"));
    REQUIRE(r.returncode == 0);
    const std::string slot = cgroup.dir().substr(cgroup.dir().find_last_of('/')) + "/" +
                             pools[0] + "/slot-" + std::to_string(r.slot);
    INFO(r.stdout_data);
    // v2: a cgroup of its own below the slot's (v1: the slot's).
    CHECK(r.stdout_data.find(slot + (cgroup.version() == detail::CgroupVersion::kV2 ? "/cmd-" : "\n")) !=
          std::string::npos);
    CHECK(r.memory_source == (has_peak_file(cgroup) ? MemorySource::kCgroup
                                                    : MemorySource::kCgroupSampled));
    CHECK(r.peak_memory_bytes > 0);
    CHECK(r.predicted_peak_bytes > 0);
    CHECK(r.predicted_in_use_bytes >= r.predicted_peak_bytes);

    const Result big = pool.run(helper_command("alloc_touch", {"48", "300", "2"}));
    REQUIRE(big.returncode == 0);
    INFO("peak " << big.peak_memory_bytes << ", rusage " << big.max_rss_kb << " kB");
    CHECK(big.peak_memory_bytes >= 90 * kMiB);  // both processes, not the largest one
    CHECK(big.max_rss_kb * 1024 < 60 * kMiB);
    CHECK_FALSE(big.oom_killed);
    CHECK(warnings.taken().empty());
    pool.close();
    CHECK(child_cgroups(cgroup.dir()).empty());
  });
}

TEST_CASE("cancel and close kill what left the command's group and session", "[pool][memory]") {
  with_test_cgroup(false, [](const TestCgroup& cgroup) {
    TempDir dir;
    const std::string pid_file = dir / "grandchild";
    const std::string line = helper("double_fork_setsid") + " 60 > " + pid_file + "; sleep 60";
    Warnings warnings;
    Pool pool(memory_options(1, cgroup.dir(), warnings));

    SECTION("cancel") {
      Job job = pool.submit(shell(line));
      const pid_t grandchild = pid_in(pid_file);
      REQUIRE(grandchild > 0);
      pool.cancel(job, SIGTERM);
      const Result r = pool.wait(job);
      CHECK(r.returncode == -SIGTERM);
      CHECK(wait_until([&] { return process_is_gone(grandchild); }));
    }
    SECTION("close") {
      Job job = pool.submit(shell(line));
      const pid_t grandchild = pid_in(pid_file);
      REQUIRE(grandchild > 0);
      pool.close();
      CHECK(process_is_gone(grandchild));  // close() waited for the slot to empty
      const Result r = pool.wait(job);
      CHECK(!(r.started() && r.returncode == 0));
      CHECK(child_cgroups(cgroup.dir()).empty());
    }
  });
}

// Two commands that do not fit together under the cgroup's limit, admitted together
// (nothing known of them; the budget is larger than the limit): the OOM killer takes
// one, which runs again alone and fits.
TEST_CASE("an OOM-killed command runs again alone and succeeds when it fits alone",
          "[pool][memory][oom]") {
  with_test_cgroup(false, [](const TestCgroup& cgroup) {
    REQUIRE(limit_memory(cgroup, 256 * kMiB));
    Warnings warnings;
    Pool pool(memory_options(2, cgroup.dir(), warnings));
    std::vector<Result> results(2);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < 2; ++i)
      threads.emplace_back([&, i] {
        results[i] = pool.run(helper_command("alloc_touch", {"160", "1500"}));
      });
    for (std::thread& thread : threads) thread.join();
    int retried = 0;
    for (const Result& r : results) {
      INFO("returncode " << r.returncode << ", retries " << r.oom_retries << ": "
                         << r.error_message);
      CHECK(r.returncode == 0);
      CHECK_FALSE(r.oom_killed);
      CHECK(r.error_message.empty());
      retried += r.oom_retries;
    }
    CHECK(retried >= 1);
    // A retry ran alone: no other command's run overlapped its second run.
    for (const Result& r : results) {
      if (r.oom_retries == 0) continue;
      CHECK(r.memory_wait_ns > 0);
      CHECK(r.predicted_peak_bytes >= 100 * kMiB);  // at least the peak it was killed at
      for (const Result& other : results)
        if (&other != &r)
          CHECK((other.exited_ns <= r.started_ns || other.started_ns >= r.exited_ns));
    }
  });
}

TEST_CASE("a command that never fits fails with the OOM message after one retry",
          "[pool][memory][oom]") {
  with_test_cgroup(false, [](const TestCgroup& cgroup) {
    REQUIRE(limit_memory(cgroup, 128 * kMiB));
    Warnings warnings;
    Pool pool(memory_options(2, cgroup.dir(), warnings, *MemoryBudget::parse("3G")));
    const Result r = pool.run(helper_command("alloc_touch", {"400"}));
    CHECK(r.started());
    CHECK(r.returncode == -SIGKILL);  // the command ran: it keeps its status
    CHECK(r.oom_killed);
    CHECK(r.oom_retries == 1);
    // Its own cgroup's peak on every kernel (sampled before 5.19), never ru_maxrss: v2
    // before 6.12 cannot reset a slot's memory.peak, which a cgroup per command needs not.
    CHECK(r.memory_source == (has_peak_file(cgroup) ? MemorySource::kCgroup
                                                    : MemorySource::kCgroupSampled));
    CHECK(r.error_message.rfind("killed by the kernel's OOM killer (peak ", 0) == 0);
    CHECK(r.error_message.find(" MiB, budget 3072 MiB)") != std::string::npos);
    const Result after = pool.run(shell("true"));  // the pool goes on
    CHECK(after.returncode == 0);
  });
}

TEST_CASE("cancel_all keeps an OOM-killed command from running again", "[pool][memory][oom]") {
  with_test_cgroup(false, [](const TestCgroup& cgroup) {
    REQUIRE(limit_memory(cgroup, 128 * kMiB));
    Warnings warnings;
    Pool pool(memory_options(2, cgroup.dir(), warnings));
    Job other = pool.submit(helper_command("sleep_ms", {"20000"}));
    Job victim = pool.submit(helper_command("alloc_touch", {"400"}));
    // The victim is killed at once; its retry waits for `other`, which the interrupt ends.
    std::this_thread::sleep_for(1s);
    pool.cancel_all(SIGTERM);
    const Result r = pool.wait(victim);
    CHECK(r.oom_retries == 0);
    if (r.oom_killed) CHECK(r.error_message.rfind("killed by the kernel's OOM killer", 0) == 0);
    CHECK(pool.wait(other).returncode == -SIGTERM);
  });
}

TEST_CASE("with cgroups turned off, peaks come from ru_maxrss", "[pool][memory]") {
  setenv("SPAWNPOOL_DISABLE_CGROUPS", "1", 1);
  TempDir parent;  // not even a cgroup: nothing is tried
  Warnings warnings;
  {
    Pool pool(memory_options(1, parent.path(), warnings));
    const Result r = pool.run(helper_command("alloc_touch", {"16", "0", "2"}));
    REQUIRE(r.returncode == 0);
    CHECK(r.memory_source == MemorySource::kRusage);
    CHECK(r.peak_memory_bytes == r.max_rss_kb * 1024);
    CHECK(r.predicted_peak_bytes > 0);  // admission still works
  }
  unsetenv("SPAWNPOOL_DISABLE_CGROUPS");
  CHECK(warnings.taken().empty());  // turned off on purpose: no warning
}

TEST_CASE("where no cgroup can be made, the pool says so once and measures ru_maxrss",
          "[pool][memory]") {
  TempDir parent;
  Warnings warnings;
  Pool pool(memory_options(2, parent.path(), warnings));
  CHECK(pool.run(shell("true")).memory_source == MemorySource::kRusage);
  const std::vector<std::string> lines = warnings.taken();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find("no per-slot memory cgroups") != std::string::npos);
}

TEST_CASE("without a memory budget the pool makes no cgroup and predicts nothing",
          "[pool][memory]") {
  with_test_cgroup(false, [](const TestCgroup& cgroup) {
    PoolOptions options = pool_options(2);
    options.memory_cgroup_parent = cgroup.dir();  // ignored without a budget
    Pool pool(options);
    const Result r = pool.run(helper_command("alloc_touch", {"8"}));
    CHECK(r.memory_source == MemorySource::kRusage);
    CHECK(r.peak_memory_bytes == r.max_rss_kb * 1024);
    CHECK(r.predicted_peak_bytes == 0);
    CHECK(child_cgroups(cgroup.dir()).empty());
  });
}

TEST_CASE("the history carries a command's peak to the next pool", "[pool][memory][history]") {
  with_test_cgroup(false, [](const TestCgroup& cgroup) {
    TempDir dir;
    Warnings warnings;
    PoolOptions options = memory_options(1, cgroup.dir(), warnings, MemoryBudget::automatic());
    options.memory_history_path = dir / "history.sqlite";
    const Command command = helper_command("alloc_touch", {"40"});
    std::int64_t measured = 0;
    {
      Pool first(options);
      const Result r = first.run(command);
      REQUIRE(r.returncode == 0);
      measured = r.peak_memory_bytes;
    }
    Pool second(options);
    const Result r = second.run(command);
    CHECK(r.predicted_peak_bytes == measured);
    CHECK(warnings.taken().empty());
  });
}

}  // namespace
}  // namespace spawnpool::test
