// One build's stack (engine/src/stack/session.h): which layers the options give and in
// which order (on a fake base), the checks runner below the launcher, the launcher's
// summary, a bad launcher, rebasing; then through real pools: a resized pool under the
// same layers, many driver threads on one session, and the pool layer's wait tick.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/src/command/prepare_command.h"
#include "engine/src/stack/pool_layer.h"
#include "engine/src/stack/session.h"
#include "tests/unit/command/command_test_support.h"
#include "tests/unit/support/leak_check.h"

namespace spawnpool::test {
namespace {

using detail::PreparedCommand;
using detail::Session;
using detail::SessionOptions;
using Words = std::vector<std::string>;

const Words kEnv = {"PATH=/usr/bin:/bin"};

Command sh(const std::string& line, Words env = kEnv) {
  return sh_line(line, std::move(env), OutputMode::kCapture);
}

TEST_CASE("by default a session is direct exec on its base", "[stack][session]") {
  FakeLayer base;
  Session session(base, SessionOptions{});
  CHECK(session.direct_exec());
  CHECK(session.launcher() == nullptr);
  CHECK(session.launcher_summary().empty());
  CHECK(&session.runner() == &session.checks_runner());  // nothing above the checks' top
  CHECK(session.run(sh("gcc -o a.o -c a.c")).returncode == 0);
  CHECK(session.run(sh("echo a > b")).returncode == 0);
  const std::vector<PreparedCommand> seen = base.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].command.argv == Words{"gcc", "-o", "a.o", "-c", "a.c"});  // no shell
  CHECK(seen[0].local);                                                   // no launcher
  CHECK(seen[1].command.argv == Words{"sh", "-c", "echo a > b"});         // needs sh
}

TEST_CASE("without direct exec the base gets the line as it was", "[stack][session]") {
  FakeLayer base;
  SessionOptions options;
  options.direct_exec = false;
  Session session(base, options);
  CHECK_FALSE(session.direct_exec());
  session.run(sh("gcc -c a.c"));
  REQUIRE(base.seen().size() == 1);
  CHECK(base.seen()[0].command.argv == Words{"sh", "-c", "gcc -c a.c"});
}

TEST_CASE("with a launcher, compiles go through it and checks do not", "[stack][session]") {
  TempDir dir;
  write_script(dir / "mylauncher", "#!/bin/sh\nexec \"$@\"\n");
  FakeLayer base;
  SessionOptions options;
  options.launcher = "mylauncher";
  options.compilers = {"nvcc"};
  options.driver_environment = Words{"PATH=" + dir.path(), "HOME=/home/someone"};
  options.message_prefix = "scons";
  Session session(base, options);
  REQUIRE(session.launcher() != nullptr);
  CHECK(session.launcher()->found());
  CHECK(&session.runner() != &session.checks_runner());
  session.run(sh("gcc -o a.o -c a.c"));       // a compile
  session.run(sh("nvcc -c k.cu"));            // a compile by the session's extra compilers
  session.run(sh("gcc -o prog a.o"));         // a link: local
  session.run(sh("gcc -c conftest.c"), true);  // a Configure check: below the launcher
  const std::vector<PreparedCommand> seen = base.seen();
  REQUIRE(seen.size() == 4);
  CHECK(seen[0].command.argv == Words{dir / "mylauncher", "gcc", "-o", "a.o", "-c", "a.c"});
  CHECK_FALSE(seen[0].local);
  CHECK(seen[0].launched);
  const Words& env = *seen[0].command.env;
  CHECK(std::find(env.begin(), env.end(), "HOME=/home/someone") != env.end());
  CHECK(seen[1].command.argv == Words{dir / "mylauncher", "nvcc", "-c", "k.cu"});
  CHECK(seen[2].command.argv == Words{"gcc", "-o", "prog", "a.o"});
  CHECK(seen[2].local);
  CHECK(seen[3].command.argv == Words{"gcc", "-c", "conftest.c"});
  CHECK_FALSE(seen[3].launched);
  CHECK(session.launcher_summary() ==
        "scons: mylauncher: 2 compiles through mylauncher, 0 failed in mylauncher; "
        "1 other commands ran locally");
  CHECK(session.launcher_counts().launched == 2);
}

// The trace's file as text, and whether it holds an event whose command is `line`.
bool traced(const std::string& trace_path, const std::string& line) {
  return read_file(trace_path).find("\"args\":{\"command\":\"" + line + "\"") !=
         std::string::npos;
}

TEST_CASE("the trace and the statistics sit below the launcher, above direct exec",
          "[stack][session]") {
  TempDir dir;
  write_script(dir / "mylauncher", "#!/bin/sh\nexec \"$@\"\n");
  FakeLayer base([](PreparedCommand& command) {
    Result r;
    if (command.line == "lost x") {  // a command that never started
      r.failure = FailureStage::kSpawnerDied;
      r.error_message = "the spawner died";
      return r;
    }
    r.returncode = 0;
    r.slot = 0;
    return r;
  });
  SessionOptions options;
  options.launcher = "mylauncher";
  options.driver_environment = Words{"PATH=" + dir.path()};
  options.trace_path = dir / "trace.json";
  options.trace_command_line = "driver -j2";
  std::vector<std::thread::id> hook_threads;
  options.trace_args = [&hook_threads] {
    hook_threads.push_back(std::this_thread::get_id());
    return std::string("\"targets\":[\"a.o\"]");
  };
  options.stats_slots = 2;
  Session session(base, options);
  REQUIRE(session.trace() != nullptr);
  REQUIRE(session.statistics() != nullptr);
  session.run(sh("gcc -o a.o -c a.c"));
  session.run(sh("gcc -c conftest.c"), true);  // the checks runner records too
  session.run(sh("lost x"));                   // unstarted: traced, no args hook
  std::thread([&session] { session.run(sh("gcc -o prog a.o")); }).join();

  // What ran: the launched line (below the launcher); direct exec ran its words below.
  const std::string launched = dir / "mylauncher" + " gcc -o a.o -c a.c";
  CHECK(base.seen()[0].command.argv == Words{dir / "mylauncher", "gcc", "-o", "a.o", "-c", "a.c"});
  CHECK(traced(dir / "trace.json", launched));
  CHECK(traced(dir / "trace.json", "gcc -c conftest.c"));
  CHECK(traced(dir / "trace.json", "gcc -o prog a.o"));
  const std::string text = read_file(dir / "trace.json");
  CHECK(text.find("\"command\":\"lost x\",\"error\":\"the spawner died\","
                  "\"stage\":\"spawner_died\"") != std::string::npos);
  CHECK(text.find("\"command_line\":\"driver -j2\"") != std::string::npos);
  // The hook: once per command that ran, on the command's thread.
  REQUIRE(hook_threads.size() == 3);
  CHECK(hook_threads[0] == std::this_thread::get_id());
  CHECK(hook_threads[2] != std::this_thread::get_id());
  std::size_t targets = 0;
  for (std::size_t at = 0; (at = text.find("\"targets\":[\"a.o\"]", at)) != std::string::npos; ++at)
    ++targets;
  CHECK(targets == 3);

  const detail::StatisticsTotals totals = session.statistics()->totals();
  CHECK(totals.commands == 4);
  CHECK(totals.unstarted == 1);
  CHECK(totals.slots == 2);
  bool longest_launched = false;
  for (const auto& [seconds, line] : session.statistics()->longest())
    longest_launched = longest_launched || line == launched;
  CHECK(longest_launched);
  CHECK(session.statistics_report("driver").find("driver: statistics\n") == 0);
}

TEST_CASE("without trace or statistics asked for, the session has neither",
          "[stack][session]") {
  FakeLayer base;
  Session session(base, SessionOptions{});
  CHECK(session.trace() == nullptr);
  CHECK(session.statistics() == nullptr);
  CHECK(session.statistics_report("x").empty());
  // A trace that cannot be written is a warning (trace_recording_test.cc), not an error.
  SessionOptions unwritable;
  unwritable.trace_path = "/nonexistent-dir/trace.json";
  std::vector<std::string> warnings;
  unwritable.warn = [&warnings](const std::string& w) { warnings.push_back(w); };
  Session without(base, unwritable);
  CHECK(without.trace() == nullptr);
  CHECK(warnings == std::vector<std::string>{
            "--trace: cannot write /nonexistent-dir/trace.json: No such file or directory"});
}

TEST_CASE("a launcher with shell syntax is refused, a blank one is none", "[stack][session]") {
  FakeLayer base;
  SessionOptions options;
  options.launcher = "distcc | tee log";
  CHECK_THROWS_AS(Session(base, options), std::invalid_argument);
  options.launcher = "  ";
  Session session(base, options);
  CHECK(session.launcher() == nullptr);
}

TEST_CASE("rebase moves every layer onto the new base", "[stack][session]") {
  FakeLayer first, second;
  SessionOptions options;
  options.launcher = "ccache";
  options.driver_environment = kEnv;
  Session session(first, options);
  session.run(sh("cc -c a.c"));
  session.rebase(second);
  session.run(sh("cc -c b.c"));
  session.run(sh("cc -c c.c"), true);
  REQUIRE(first.seen().size() == 1);
  REQUIRE(second.seen().size() == 2);
  CHECK(second.seen()[0].launched);  // the launcher is still on top
  CHECK(second.seen()[0].command.argv.back() == "b.c");
  CHECK(second.seen()[1].command.argv == Words{"cc", "-c", "c.c"});
  CHECK(session.launcher_counts().launched == 2);  // one layer, counting across bases
}

TEST_CASE("a session runs on a pool and on the resized pool after it", "[stack][session]") {
  LeakCheck leaks;
  {
    const Words env = helper_env();
    Pool small(pool_options(1));
    Session session(small, SessionOptions{});
    Result r = session.run(sh("exit_as 3", env));
    INFO(r.error_message);
    CHECK(r.returncode == 3);
    CHECK(r.slot == 0);
    r = session.run(sh("exit_as -11", env));  // direct exec: as sh would have said it
    CHECK(r.returncode == 128 + SIGSEGV);
    CHECK(r.stderr_data == "Segmentation fault\n");
    {
      Pool larger(pool_options(2));
      session.rebase(larger);
      small.close();
      r = session.run(sh("exit_as 4", env));
      CHECK(r.returncode == 4);
      r = session.run(sh("no-such-program-x", env));  // sh says it, in its own words
      CHECK(r.returncode == 127);
      CHECK(r.stderr_data.find("not found") != std::string::npos);
      session.rebase(small);  // let go of `larger` before it is destroyed
    }
    r = session.run(sh("exit_as 0", env));
    CHECK(r.failure == FailureStage::kPoolClosed);  // a failure is a Result
  }
  leaks.verify();
}

TEST_CASE("a session's runner serves many driver threads at once", "[stack][session]") {
  LeakCheck leaks;
  {
    TempDir dir;
    write_script(dir / "launch", "#!/bin/sh\nexec \"$@\"\n");
    write_script(dir / "cc", "#!/bin/sh\nexit 0\n");
    const Words env = helper_env({"PATH=" + dir.path() + ":/usr/bin:/bin"});
    Pool pool(pool_options(2));
    SessionOptions options;
    options.launcher = "launch";
    options.driver_environment = Words{"PATH=" + dir.path()};
    Session session(pool, options);
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
      threads.emplace_back([&session, &env, &failed, t] {
        for (int i = 0; i < 10; ++i) {
          const std::string line = i % 2 ? "cc -c f" + std::to_string(t) + ".c" : "exit_as 0";
          if (session.run(sh(line, env)).returncode != 0) ++failed;
        }
      });
    for (std::thread& thread : threads) thread.join();
    CHECK(failed == 0);
    const detail::LauncherCounts counts = session.launcher_counts();
    CHECK(counts.launched == 20);
    CHECK(counts.local_commands == 20);
  }
  leaks.verify();
}

TEST_CASE("the pool layer serves the command's wait tick while it waits", "[stack][pool]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    detail::PoolLayer layer(pool);
    Command command = helper_command("sleep_ms", {"5000"});
    PreparedCommand prepared = detail::prepare_command(command);
    int ticks = 0;
    const std::function<int()> tick = [&ticks] { return ++ticks == 2 ? SIGTERM : 0; };
    prepared.wait_tick = &tick;
    const Result r = layer.run(prepared);
    CHECK(r.returncode == -SIGTERM);
    CHECK(ticks >= 2);
    PreparedCommand plain = detail::prepare_command(helper_command("exit_with", {"5"}));
    CHECK(layer.run(plain).returncode == 5);
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
