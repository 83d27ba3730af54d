// Many callers, few slots: every caller gets its own command's result; and the
// submit / try_submit / wait contract (a slot is busy until its Job is waited for).
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

using namespace std::chrono_literals;

TEST_CASE("16 threads sharing a 2-slot pool each get their own results",
          "[pool][concurrency]") {
  constexpr int kThreads = 16, kRuns = 25;
  LeakCheck leaks;
  {
    Pool pool(pool_options(2));
    REQUIRE(pool.slots() == 2);
    std::atomic<int> wrong{0}, done{0};
    std::vector<std::string> errors(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < kRuns; ++i) {
          const std::string token = std::to_string(t) + "/" + std::to_string(i);
          Result r;
          bool ok;
          switch (i % 3) {
            case 0:  // output, apart
              r = pool.run(helper_command("write_streams", {"out:o" + token, "err:e" + token}));
              ok = r.returncode == 0 && r.stdout_data == "o" + token &&
                   r.stderr_data == "e" + token;
              break;
            case 1:  // exit code
              r = pool.run(helper_command("exit_with", {std::to_string((t * 31 + i) % 256)}));
              ok = r.returncode == (t * 31 + i) % 256 && r.stdout_data.empty();
              break;
            default:  // environment
              Command command = helper_command("print_env");
              command.env = std::vector<std::string>{"TOKEN=" + token};
              r = pool.run(command);
              ok = r.returncode == 0 && r.stdout_data == "TOKEN=" + token + std::string(1, '\0');
          }
          if (!ok) {
            ++wrong;
            errors[t] += "run " + token + ": returncode " + std::to_string(r.returncode) +
                         " stdout '" + r.stdout_data + "' " + r.error_message + "\n";
          }
          ++done;
        }
      });
    }
    for (auto& thread : threads) thread.join();
    std::string all;
    for (const auto& e : errors) all += e;
    INFO(all);
    CHECK(wrong == 0);
    CHECK(done == kThreads * kRuns);
  }
  leaks.verify();
}

TEST_CASE("submit and wait hand a result over exactly once", "[pool][jobs]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job job = pool.submit(helper_command("exit_with", {"12"}));
    CHECK(job.pending());
    const Result r = pool.wait(job);
    CHECK(r.returncode == 12);
    CHECK_FALSE(job.pending());
    CHECK_THROWS_AS(pool.wait(job), std::logic_error);
    Job never_submitted;
    CHECK_FALSE(never_submitted.pending());
    CHECK_THROWS_AS(pool.wait(never_submitted), std::logic_error);
  }
  leaks.verify();
}

TEST_CASE("a moved Job carries its result", "[pool][jobs]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job first = pool.submit(helper_command("exit_with", {"21"}));
    Job second = std::move(first);
    CHECK_FALSE(first.pending());
    CHECK(second.pending());
    CHECK(pool.wait(second).returncode == 21);
    CHECK_THROWS_AS(pool.wait(first), std::logic_error);
    // Move-assigning over a pending Job waits for it first, freeing its slot.
    Job third = pool.submit(helper_command("sleep_ms", {"50"}));
    third = Job{};
    CHECK_FALSE(third.pending());
    std::optional<Job> fourth = pool.try_submit(helper_command("exit_with", {"22"}));
    REQUIRE(fourth.has_value());
    CHECK(pool.wait(*fourth).returncode == 22);
  }
  leaks.verify();
}

TEST_CASE("a slot stays busy until its Job is waited for", "[pool][jobs]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job job = pool.submit(helper_command("exit_with", {"0"}));
    std::this_thread::sleep_for(100ms);  // the command has long finished
    CHECK_FALSE(pool.try_submit(helper_command("exit_with", {"1"})).has_value());
    CHECK(pool.wait(job).returncode == 0);
    std::optional<Job> next = pool.try_submit(helper_command("exit_with", {"2"}));
    REQUIRE(next.has_value());
    CHECK(pool.wait(*next).returncode == 2);
  }
  leaks.verify();
}

TEST_CASE("try_submit returns nothing while every slot is busy", "[pool][jobs]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(2));
    Job a = pool.submit(helper_command("sleep_ms", {"200"}));
    Job b = pool.submit(helper_command("sleep_ms", {"200"}));
    CHECK_FALSE(pool.try_submit(helper_command("exit_with", {"0"})).has_value());
    CHECK(pool.wait(a).returncode == 0);
    std::optional<Job> c = pool.try_submit(helper_command("exit_with", {"3"}));
    REQUIRE(c.has_value());
    CHECK(c->pending());
    CHECK(pool.wait(*c).returncode == 3);
    CHECK(pool.wait(b).returncode == 0);
  }
  leaks.verify();
}

TEST_CASE("submit waits for a free slot", "[pool][jobs]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job held = pool.submit(helper_command("exit_with", {"0"}));
    std::atomic<bool> submitted{false};
    Result second;
    std::thread caller([&] {
      Job job = pool.submit(helper_command("exit_with", {"5"}));
      submitted = true;
      second = pool.wait(job);
    });
    std::this_thread::sleep_for(300ms);
    CHECK_FALSE(submitted);  // cannot have a slot: the only one is held
    CHECK(pool.wait(held).returncode == 0);
    caller.join();
    CHECK(submitted);
    CHECK(second.returncode == 5);
  }
  leaks.verify();
}

TEST_CASE("a Job destroyed without wait gives its slot back", "[pool][jobs]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    { Job dropped = pool.submit(helper_command("sleep_ms", {"100"})); }
    std::optional<Job> next = pool.try_submit(helper_command("exit_with", {"8"}));
    REQUIRE(next.has_value());
    CHECK(pool.wait(*next).returncode == 8);
  }
  leaks.verify();
}

TEST_CASE("a closed pool refuses commands as data", "[pool][jobs][close]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(2));
    const std::vector<int> spawners = pool.spawner_pids();
    CHECK(spawners.size() == 2);
    pool.close();
    check_spawners_gone(spawners);
    CHECK(pool.spawner_pids().empty());
    pool.close();  // idempotent

    const Result r = pool.run(helper_command("exit_with", {"0"}));
    CHECK(r.failure == FailureStage::kPoolClosed);
    CHECK(r.error_number == ESHUTDOWN);
    CHECK_THAT(r.error_message, Catch::Contains("closed"));
    std::optional<Job> job = pool.try_submit(helper_command("exit_with", {"0"}));
    REQUIRE(job.has_value());
    CHECK(pool.wait(*job).failure == FailureStage::kPoolClosed);
  }
  leaks.verify();
}

TEST_CASE("callers waiting for a slot are released by close", "[pool][jobs][close]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    Job held = pool.submit(helper_command("exit_with", {"0"}));
    Result queued;
    std::thread caller([&] { queued = pool.run(helper_command("exit_with", {"1"})); });
    std::this_thread::sleep_for(100ms);
    pool.close();
    caller.join();
    CHECK(queued.failure == FailureStage::kPoolClosed);
    CHECK(queued.error_number == ESHUTDOWN);
    // The held job's command had finished; its reply may or may not have been taken
    // before close, but wait returns either way.
    const Result r = pool.wait(held);
    CHECK((r.returncode == 0 || r.failure == FailureStage::kPoolClosed));
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
