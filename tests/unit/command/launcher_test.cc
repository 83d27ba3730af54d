// The compiler launcher and its layer: what a launcher is (found on the driver's PATH,
// its words, the driver's variables, distcc's failures and fallbacks), and what the layer
// does to compiles and to everything else, on a fake inner layer; then a launched compile
// through direct exec and a real pool.
#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "engine/src/command/direct_exec.h"
#include "engine/src/command/launcher_layer.h"
#include "engine/src/command/prepare_command.h"
#include "tests/unit/command/command_test_support.h"
#include "tests/unit/support/leak_check.h"

namespace spawnpool::test {
namespace {

using detail::Launcher;
using detail::LauncherLayer;
using detail::PreparedCommand;
using Words = std::vector<std::string>;

const Words kDriverPath = {"PATH=/usr/bin:/bin"};

PreparedCommand sh(const std::string& line, Words env = {"PATH=/usr/bin:/bin"},
                   OutputMode output = OutputMode::kPassthrough) {
  return detail::prepare_command(sh_line(line, std::move(env), output));
}

Words sorted(Words words) {
  std::sort(words.begin(), words.end());
  return words;
}

TEST_CASE("a launcher is found on the driver's PATH, once", "[command][launcher]") {
  TempDir dir;
  write_script(dir / "mylauncher", "#!/bin/sh\nexec \"$@\"\n");
  const Launcher launcher("mylauncher --flag", {"PATH=" + dir.path()});
  CHECK(launcher.found());
  CHECK(launcher.name() == "mylauncher");
  CHECK(launcher.words() == Words{dir / "mylauncher", "--flag"});
  CHECK(launcher.prefix() == dir / "mylauncher" + " --flag");
  const Launcher missing("no-such-launcher-x", {"PATH=" + dir.path()});
  CHECK_FALSE(missing.found());
  CHECK(missing.prefix() == "no-such-launcher-x");
  CHECK(missing.failure(127).find("was not found on PATH") != std::string::npos);
  const Launcher spaced("'/opt/my tools/distcc'", {});
  CHECK(spaced.found());  // a path is taken as it is
  CHECK(spaced.prefix() == "'/opt/my tools/distcc'");
  CHECK(spaced.is_distcc());
  CHECK_THROWS_AS(Launcher("   ", kDriverPath), std::invalid_argument);
  CHECK_THROWS_AS(Launcher("distcc; rm -rf x", kDriverPath), std::invalid_argument);
}

TEST_CASE("a launcher adds the driver's variables a command lacks", "[command][launcher]") {
  const Launcher launcher("distcc", {"HOME=/home/u", "DISTCC_HOSTS=a b", "CCACHE_DIR=/c",
                                     "ICECC_VERSION=v", "SCCACHE_DIR=/s", "PATH=/driver",
                                     "OTHER=x"});
  Words env = {"PATH=/usr/bin:/bin", "DISTCC_HOSTS=mine"};
  launcher.add_environment(env);
  CHECK(sorted(env) == sorted({"PATH=/usr/bin:/bin", "DISTCC_HOSTS=mine", "HOME=/home/u",
                               "CCACHE_DIR=/c", "ICECC_VERSION=v", "SCCACHE_DIR=/s"}));
  Words complete = env;
  launcher.add_environment(complete);
  CHECK(complete == env);
}

TEST_CASE("distcc's failures are named, its fallbacks recognised", "[command][launcher]") {
  const Launcher distcc("distcc", kDriverPath);
  CHECK(distcc.is_distcc());
  CHECK(distcc.failure(116) == "distcc failed to distribute (exit 116)");
  CHECK(distcc.failure(110).find("compiler") != std::string::npos);
  CHECK(distcc.failure(0).empty());
  CHECK(distcc.failure(1).empty());  // the compiler's
  CHECK(distcc.ran_locally("distcc[12] (dcc_build_somewhere) Warning: failed to distribute, "
                           "running locally instead\n"));
  CHECK(distcc.ran_locally("distcc[3] (dcc_build_somewhere) Warning: remote compilation of "
                           "'a.c' failed, retrying locally\n"));
  CHECK_FALSE(distcc.ran_locally("a.c:1: warning: unused variable\n"));
  CHECK_FALSE(distcc.ran_locally(""));
  CHECK(Launcher("ccache distcc", kDriverPath).is_distcc());
  const Launcher other("sh", kDriverPath);
  CHECK_FALSE(other.is_distcc());
  CHECK(other.failure(116).empty());
  CHECK(other.failure(126) == "sh could not be executed (exit 126)");
  CHECK_FALSE(other.ran_locally("running locally instead"));
}

TEST_CASE("compiles run through the launcher, everything else as it is", "[command][launcher]") {
  FakeLayer inner;
  const Words driver = {"PATH=/usr/bin:/bin", "DISTCC_HOSTS=somehost", "HOME=/home/someone"};
  LauncherLayer layer(inner, Launcher("distcc", driver));
  const std::string prefix = layer.launcher().prefix();
  PreparedCommand compile = sh("gcc -o a.o -c a.c");
  PreparedCommand assigned = sh("X=1 gcc -c a.c && touch stamp");
  PreparedCommand link = sh("gcc -o prog a.o");
  {
    CapturedFd out(1), err(2);  // the distcc compiles print their (empty) blocks
    CHECK(layer.run(compile).returncode == 0);
    CHECK(layer.run(assigned).returncode == 0);
    CHECK(layer.run(link).returncode == 0);
  }
  const std::vector<PreparedCommand> seen = inner.seen();
  REQUIRE(seen.size() == 3);
  CHECK(seen[0].command.argv == Words{"sh", "-c", prefix + " gcc -o a.o -c a.c"});
  CHECK(seen[0].launcher_words == layer.launcher().words());  // direct exec runs them
  CHECK(seen[0].launched);
  CHECK_FALSE(seen[0].local);
  const Words& env = *seen[0].command.env;
  CHECK(env[detail::environment_index(env, "DISTCC_HOSTS")] == "DISTCC_HOSTS=somehost");
  CHECK(env[detail::environment_index(env, "HOME")] == "HOME=/home/someone");
  CHECK(seen[0].command.output != OutputMode::kPassthrough);  // distcc: captured to spot fallbacks
  CHECK(seen[0].line == "gcc -o a.o -c a.c");                 // the caller's, for messages
  CHECK(seen[1].command.argv[2] == "X=1 " + prefix + " gcc -c a.c && touch stamp");
  CHECK(seen[1].launcher_words.empty());  // not a simple line: sh runs it
  CHECK(seen[2].command.argv == Words{"sh", "-c", "gcc -o prog a.o"});
  CHECK(*seen[2].command.env == Words{"PATH=/usr/bin:/bin"});
  CHECK(seen[2].command.output == OutputMode::kPassthrough);
  CHECK_FALSE(seen[2].launched);
  CHECK(seen[2].local);
  const detail::LauncherCounts counts = layer.counts();
  CHECK(counts.launched == 2);
  CHECK(counts.local_commands == 1);
}

TEST_CASE("an argv compile gets the launcher's words in front", "[command][launcher]") {
  FakeLayer inner;
  LauncherLayer layer(inner, Launcher("/usr/bin/ccache", kDriverPath));
  Command command;
  command.argv = {"g++", "-c", "a.cc", "-o", "a.o"};
  command.env = Words{};
  command.output = OutputMode::kCapture;
  PreparedCommand prepared = detail::prepare_command(command);
  layer.run(prepared);
  CHECK(inner.seen().at(0).command.argv == Words{"/usr/bin/ccache", "g++", "-c", "a.cc", "-o", "a.o"});
  CHECK(inner.seen().at(0).command.output == OutputMode::kCapture);  // not distcc
}

TEST_CASE("a distcc compile the caller lets print is shown as one block", "[command][launcher]") {
  FakeLayer inner([](PreparedCommand&) { return ran(0, "compiled\n", "a warning\n"); });
  PreparedCommand compile = sh("gcc -c a.c");
  Result result;
  std::string out, err;
  {
    CapturedFd out_fd(1), err_fd(2);  // two files: captured apart (the layer looks now)
    LauncherLayer layer(inner, Launcher("distcc", kDriverPath));
    result = layer.run(compile);
    out = out_fd.text();
    err = err_fd.text();
  }
  CHECK(inner.seen().at(0).command.output == OutputMode::kCapture);
  CHECK(out == "compiled\n");
  CHECK(err == "a warning\n");
  CHECK_FALSE(result.captured);  // the caller asked for passthrough: it was shown
  CHECK(result.stdout_data.empty());
  SECTION("one file for both: captured merged") {
    TempDir dir;
    const int file = open((dir / "both").c_str(), O_WRONLY | O_CREAT, 0600);
    const int saved_out = dup(1), saved_err = dup(2);
    dup2(file, 1);
    dup2(file, 2);
    FakeLayer merged;
    LauncherLayer layer(merged, Launcher("distcc", kDriverPath));
    PreparedCommand again = sh("gcc -c a.c");
    layer.run(again);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    for (int fd : {file, saved_out, saved_err}) close(fd);
    CHECK(merged.seen().at(0).command.output == OutputMode::kCaptureMerged);
  }
}

TEST_CASE("a caller that captures gets the output, and nothing is printed", "[command][launcher]") {
  const std::string warning = "distcc[9] Warning: failed to distribute, running locally instead\n";
  FakeLayer inner([&](PreparedCommand&) { return ran(0, warning); });
  LauncherLayer layer(inner, Launcher("distcc", kDriverPath));
  PreparedCommand compile = sh("gcc -c a.c", kDriverPath, OutputMode::kCaptureMerged);
  Result result;
  std::string printed;
  {
    CapturedFd out(1), err(2);
    result = layer.run(compile);
    printed = out.text() + err.text();
  }
  CHECK(result.stdout_data == warning);
  CHECK(inner.seen().at(0).command.output == OutputMode::kCaptureMerged);
  CHECK(printed.empty());
  CHECK(layer.counts().ran_locally == 1);
}

TEST_CASE("a launcher's failure is named after the command's output", "[command][launcher]") {
  FakeLayer inner([](PreparedCommand&) { return ran(116, "", "distcc[1] ERROR: x\n"); });
  LauncherLayer layer(inner, Launcher("distcc", kDriverPath));
  PreparedCommand compile = sh("gcc -c a.c");
  std::string err;
  {
    CapturedFd out(1), err_fd(2);
    CHECK(layer.run(compile).returncode == 116);
    err = err_fd.text();
  }
  CHECK(err == "distcc[1] ERROR: x\n"
               "spawnpool: distcc failed to distribute (exit 116) for: gcc -c a.c\n");
  CHECK(layer.counts().launcher_failed == 1);
  SECTION("a long line is cut in the message") {
    PreparedCommand long_compile = sh("gcc -c a.c " + std::string(300, 'x'));
    CapturedFd out(1), err_fd(2);
    layer.run(long_compile);
    const std::string text = err_fd.text();
    const std::string shown = text.substr(text.find(" for: ") + 6);
    CHECK(shown == "gcc -c a.c " + std::string(200 - 3 - 11, 'x') + "...\n");
  }
}

TEST_CASE("fallbacks and failures are counted for the summary", "[command][launcher]") {
  const std::string warning =
      "distcc[9] (dcc_build_somewhere) Warning: failed to distribute, running locally instead\n";
  int calls = 0;
  FakeLayer inner([&](PreparedCommand&) { return ++calls == 1 ? ran(0, "", warning) : ran(0); });
  LauncherLayer layer(inner, Launcher("distcc", kDriverPath));
  PreparedCommand a = sh("gcc -c a.c"), b = sh("gcc -c b.c"), c = sh("ar rc l.a a.o");
  {
    CapturedFd out(1), err(2);
    layer.run(a);
    layer.run(b);
    layer.run(c);
  }
  CHECK(layer.summary() ==
        "spawnpool: distcc: 2 compiles through distcc, 1 of them compiled locally by distcc "
        "(fallback), 0 failed in distcc; 1 other commands ran locally");
  FakeLayer quiet;
  LauncherLayer ccache(quiet, Launcher("ccache", kDriverPath), "scons");
  CHECK(ccache.summary() ==
        "scons: ccache: 0 compiles through ccache, 0 failed in ccache; 0 other commands ran locally");
}

TEST_CASE("a launched compile runs through direct exec and a real pool", "[command][launcher]") {
  LeakCheck leaks;
  {
    TempDir dir;
    // A launcher that says it ran and runs its command; a "compiler" that prints its argv.
    write_script(dir / "launch", "#!/bin/sh\necho launched >&2\nexec \"$@\"\n");
    write_script(dir / "cc", "#!/bin/sh\necho \"cc $*\"\n");
    const Words env = helper_env({"PATH=" + dir.path() + ":/usr/bin:/bin"});
    Pool pool(pool_options(1));
    PoolLayer bottom(pool);
    FakeLayer::Answer pass = [&](PreparedCommand& c) { return bottom.run(c); };
    FakeLayer recording(pass);
    detail::DirectExec direct(recording);
    LauncherLayer layer(direct, Launcher("launch", {"PATH=" + dir.path()}));
    for (const char* line : {"cc -c 'a b.c'", "cc -c a.c && echo linked"}) {
      Command command;
      command.argv = {"sh", "-c", line};
      command.env = env;
      command.output = OutputMode::kCapture;
      PreparedCommand prepared = detail::prepare_command(command);
      const Result r = layer.run(prepared);
      CAPTURE(line, r.error_message);
      CHECK(r.returncode == 0);
      CHECK(r.stderr_data == "launched\n");
      CHECK(r.stdout_data.rfind("cc -c a", 0) == 0);
    }
    const std::vector<PreparedCommand> seen = recording.seen();
    REQUIRE(seen.size() == 2);
    CHECK(seen[0].command.argv == Words{dir / "launch", "cc", "-c", "a b.c"});  // no shell
    CHECK(seen[1].command.argv[0] == "sh");
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test

namespace spawnpool::test {
namespace {

TEST_CASE("the layer counts right from many threads at once", "[command][launcher]") {
  FakeLayer inner;
  detail::LauncherLayer layer(inner, detail::Launcher("ccache", kDriverPath));
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&layer, t] {
      for (int i = 0; i < 50; ++i) {
        detail::PreparedCommand command =
            sh(i % 2 ? "ar rc l" + std::to_string(t) + ".a x.o" : "cc -c f" + std::to_string(i) + ".c");
        layer.run(command);
      }
    });
  for (std::thread& thread : threads) thread.join();
  const detail::LauncherCounts counts = layer.counts();
  CHECK(counts.launched == 200);
  CHECK(counts.local_commands == 200);
  CHECK(inner.seen().size() == 400);
}

}  // namespace
}  // namespace spawnpool::test
