// Direct exec is `/bin/sh -c LINE` without the shell: the same argv, environment (PWD as
// dash exports it), status and output. Checked on a fake inner layer (what it hands down,
// what it puts back, when it asks sh after all), then end to end through a real pool
// against the real /bin/sh (dash), including the 126/127 cases it hands back to sh and
// the signal statuses it maps.
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/src/command/direct_exec.h"
#include "engine/src/command/prepare_command.h"
#include "tests/unit/command/command_test_support.h"
#include "tests/unit/support/test_skip.h"
#include "tests/unit/support/leak_check.h"

namespace spawnpool::test {
namespace {

namespace fs = std::filesystem;
using detail::DirectExec;
using detail::PreparedCommand;
using Words = std::vector<std::string>;

PreparedCommand sh(const std::string& line, Words env, const std::string& cwd,
                   OutputMode output = OutputMode::kCapture, const std::string& shell = "sh") {
  Command command;
  command.argv = {shell, "-c", line};
  command.env = std::move(env);
  command.cwd = cwd;
  command.output = output;
  return detail::prepare_command(command);
}

std::string value_of(const Words& env, const std::string& name) {
  const std::size_t i = detail::environment_index(env, name);
  return i < env.size() ? env[i].substr(name.size() + 1) : "<unset>";
}

TEST_CASE("a simple sh line runs as its program, with PWD, and is put back", "[command][direct]") {
  TempDir dir;
  FakeLayer inner;
  DirectExec direct(inner);
  PreparedCommand command = sh("print_argv 'a b' c", {"PATH=/bin"}, dir.path());
  const Command before = command.command;
  CHECK(direct.run(command).returncode == 0);
  const std::vector<PreparedCommand> seen = inner.seen();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0].command.argv == Words{"print_argv", "a b", "c"});
  CHECK(value_of(*seen[0].command.env, "PWD") == fs::canonical(dir.path()).string());
  CHECK(seen[0].command.output == OutputMode::kCapture);
  CHECK(command.command.argv == before.argv);
  CHECK(*command.command.env == *before.env);
}

TEST_CASE("PWD is exported as dash does", "[command][direct]") {
  TempDir dir;
  fs::create_directory(dir / "real");
  fs::create_directory_symlink(dir / "real", dir / "link");
  const std::string real = fs::canonical(dir / "real").string();
  Words env = {"PATH=/bin"};
  SECTION("none: the physical cwd") {
    detail::PwdChange change = detail::export_pwd(env, dir / "link");
    CHECK(value_of(env, "PWD") == real);
    detail::restore_pwd(env, change);
    CHECK(env == Words{"PATH=/bin"});
  }
  SECTION("a logical path to the cwd is kept") {
    env.push_back("PWD=" + dir / "link");
    const Words before = env;
    detail::PwdChange change = detail::export_pwd(env, real);
    CHECK(env == before);
    CHECK(change.kind == detail::PwdChange::kNone);
  }
  SECTION("a stale or relative one is replaced, and restored") {
    for (const std::string& pwd : {dir.path(), std::string("relative"), std::string()}) {
      env = {"PWD=" + pwd, "PATH=/bin"};
      detail::PwdChange change = detail::export_pwd(env, real);
      CHECK(env == Words{"PWD=" + real, "PATH=/bin"});
      detail::restore_pwd(env, change);
      CHECK(env == Words{"PWD=" + pwd, "PATH=/bin"});
    }
  }
}

TEST_CASE("what direct exec leaves to sh", "[command][direct]") {
  FakeLayer inner;
  DirectExec direct(inner);
  // Shell syntax; another shell; no PATH (dash's default is not execvp's); no cwd.
  PreparedCommand cases[] = {
      sh("print_argv $HOME", {"PATH=/bin"}, "/"),
      sh("print_argv a", {"PATH=/bin"}, "/", OutputMode::kCapture, "bash"),
      sh("ls /", {"LC_ALL=C"}, "/"),
  };
  for (PreparedCommand& command : cases) direct.run(command);
  PreparedCommand no_cwd = sh("print_argv a", {"PATH=/bin"}, "/");
  no_cwd.command.cwd.clear();
  direct.run(no_cwd);
  for (const PreparedCommand& seen : inner.seen()) {
    CAPTURE(seen.line);
    CHECK(seen.command.argv.size() == 3);
    CHECK(value_of(*seen.command.env, "PWD") == "<unset>");
  }
  // A program path needs no PATH.
  PreparedCommand path = sh("/bin/ls /", {"LC_ALL=C"}, "/");
  direct.run(path);
  CHECK(inner.seen().back().command.argv == Words{"/bin/ls", "/"});
}

TEST_CASE("a program that cannot start runs through sh, and other failures stand", "[command][direct]") {
  std::vector<Words> argvs;
  FakeLayer exec_fails([&](PreparedCommand& c) {
    argvs.push_back(c.command.argv);
    return argvs.size() == 1 ? not_started(FailureStage::kExec, ENOENT) : ran(127, "", "sh: 1: x\n");
  });
  DirectExec direct(exec_fails);
  PreparedCommand command = sh("nosuch a", {"PATH=/bin"}, "/");
  const Result r = direct.run(command);
  CHECK(r.returncode == 127);
  CHECK(argvs == std::vector<Words>{{"nosuch", "a"}, {"sh", "-c", "nosuch a"}});
  CHECK(value_of(*command.command.env, "PWD") == "<unset>");  // sh exports its own

  int calls = 0;
  FakeLayer died([&](PreparedCommand&) {
    ++calls;
    return not_started(FailureStage::kSpawnerDied, ECHILD);
  });
  DirectExec direct_died(died);
  PreparedCommand again = sh("prog", {"PATH=/bin"}, "/");
  CHECK(direct_died.run(again).failure == FailureStage::kSpawnerDied);
  CHECK(calls == 1);  // it may have run: never twice
}

TEST_CASE("a signal's status and message are sh's", "[command][direct]") {
  CHECK(detail::sh_status(0).returncode == 0);
  CHECK(detail::sh_status(3).returncode == 3);
  CHECK(detail::sh_status(-SIGSEGV).returncode == 128 + SIGSEGV);
  CHECK(detail::sh_status(-SIGSEGV).message == "Segmentation fault\n");
  CHECK(detail::sh_status(-SIGKILL).message == "Killed\n");
  CHECK(detail::sh_status(-SIGPIPE).returncode == 128 + SIGPIPE);
  CHECK(detail::sh_status(-SIGPIPE).message.empty());
  CHECK(detail::sh_status(-SIGRTMIN).message == "Real-time signal 0\n");
  for (int group : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    CHECK(detail::sh_status(-group).returncode == -group);
    CHECK(detail::sh_status(-group).message.empty());
  }
  struct Case {
    OutputMode output;
    std::string out, err, printed;
  };
  const Case c = GENERATE(values<Case>({
      {OutputMode::kCapture, "", "Aborted\n", ""},
      {OutputMode::kCaptureMerged, "Aborted\n", "", ""},
      {OutputMode::kPassthrough, "", "", "Aborted\n"},
  }));
  FakeLayer aborted([](PreparedCommand&) { return ran(-SIGABRT); });
  DirectExec direct(aborted);
  PreparedCommand command = sh("prog", {"PATH=/bin"}, "/", c.output);
  Result r;
  std::string printed;
  {
    CapturedFd err(2);
    r = direct.run(command);
    printed = err.text();
  }
  CHECK(r.returncode == 128 + SIGABRT);
  CHECK(r.stdout_data == c.out);
  CHECK(r.stderr_data == c.err);
  CHECK(printed == c.printed);
}

// --- end to end through the pool, against /bin/sh -------------------------------------

struct Workdir {
  TempDir dir;
  Workdir() {
    std::ofstream(dir / "not_executable") << "#!/bin/sh\necho never\n";
    fs::create_directory(dir / "a_directory");
    std::ofstream(dir / "script_without_shebang")
        << "echo run by sh as a script: \"$0\" \"$1\"\nexit 4\n";
    chmod((dir / "script_without_shebang").c_str(), 0755);
    fs::create_directory(dir / "bin");
    std::ofstream(dir / "bin/on_path_not_executable") << "echo never\n";
  }
};

// sh's outcome, ours (direct exec on a recording layer on the pool), and the argvs run.
struct Both {
  Outcome sh, ours;
  std::vector<Words> argvs;
};

Both run_both(Pool& pool, const std::string& line, const Words& env, const std::string& cwd) {
  Both both;
  both.sh = sh_outcome(line, env, cwd);
  PoolLayer bottom(pool);
  FakeLayer recording([&](PreparedCommand& c) {
    both.argvs.push_back(c.command.argv);
    return bottom.run(c);
  });
  DirectExec direct(recording);
  PreparedCommand command = sh(line, env, cwd);
  const Result r = direct.run(command);
  INFO(r.error_message);
  REQUIRE(r.started());
  both.ours = {r.returncode, r.stdout_data, r.stderr_data};
  return both;
}

struct StatusCase {
  std::string line;
  int status;           // -1000: compare with sh only
  std::string stderr_text;
  bool direct;          // direct exec was tried first
};

TEST_CASE("through a pool, direct exec ends as sh does", "[command][direct]") {
  TEST_SKIP_UNLESS(have_dash(), "/bin/dash is not installed");
  const auto signalled = [](int n) { return "exit_as -" + std::to_string(n); };
  const StatusCase c = GENERATE_COPY(values<StatusCase>({
      {"exit_as 0", 0, "", true},
      {"exit_as 3", 3, "", true},
      {"exit_as 255", 255, "", true},
      {signalled(SIGSEGV), 128 + SIGSEGV, "Segmentation fault\n", true},
      {signalled(SIGABRT), 128 + SIGABRT, "Aborted\n", true},
      {signalled(SIGKILL), 128 + SIGKILL, "Killed\n", true},
      {signalled(SIGUSR1), 128 + SIGUSR1, "User defined signal 1\n", true},
      {signalled(SIGPIPE), 128 + SIGPIPE, "", true},
      {signalled(SIGRTMIN + 2), 128 + SIGRTMIN + 2, "Real-time signal 2\n", true},
      {"no_such_program_for_the_test", 127,
       "sh: 1: no_such_program_for_the_test: not found\n", true},
      {"/no/such/dir/prog", 127, "sh: 1: /no/such/dir/prog: not found\n", true},
      {"./not_executable", 126, "sh: 1: ./not_executable: Permission denied\n", true},
      {"./a_directory", 126, "sh: 1: ./a_directory: Permission denied\n", true},
      {"on_path_not_executable", -1000, "", true},
      {"./script_without_shebang arg", 4, "", true},
      {"print_argv \"a b\" 'c'", 0, "", true},
      {"print_argv $HOME", 0, "", false},
      {"exit_as 2 && echo no", 2, "", false},
  }));
  CAPTURE(c.line);
  LeakCheck leaks;
  {
    Workdir work;
    Pool pool(pool_options(1));
    const Words env = helper_env({"HOME=/home/x"});
    Words with_bin = env;
    with_bin[0] += ":" + work.dir / "bin";
    const Both both = run_both(pool, c.line, with_bin, work.dir.path());
    if (c.line.rfind("print_argv", 0) == 0) {
      // The same argv and environment (PWD included); the environment's order may differ.
      CHECK(parse_print_argv(both.ours.out) == parse_print_argv(both.sh.out));
      CHECK(both.ours.status == both.sh.status);
      CHECK(both.ours.err == both.sh.err);
    } else {
      CHECK(both.ours == both.sh);
      INFO("ours: " << both.ours.status << " " << both.ours.err);
    }
    if (c.status != -1000) {
      CHECK(both.sh.status == c.status);
      CHECK(both.sh.err == c.stderr_text);
    }
    REQUIRE_FALSE(both.argvs.empty());
    CHECK((both.argvs[0][0] != "sh") == c.direct);
  }
  leaks.verify();
}

TEST_CASE("through a pool, PWD is the one dash exports", "[command][direct]") {
  TEST_SKIP_UNLESS(have_dash(), "/bin/dash is not installed");
  LeakCheck leaks;
  {
    TempDir dir;
    fs::create_directory(dir / "real");
    fs::create_directory_symlink(dir / "real", dir / "link");
    Pool pool(pool_options(1));
    const std::vector<Words> extras = {
        {},                           // no PWD: the physical cwd
        {"PWD=" + dir / "link"},      // a logical path to the cwd: kept
        {"PWD=" + dir.path()},        // stale: replaced
        {"PWD=relative"},             // not absolute: replaced
        {"PWD=" + dir / "real"},      // exact
    };
    for (const Words& extra : extras) {
      for (const std::string& cwd : {dir / "real", dir / "link"}) {
        CAPTURE(extra, cwd);
        const Both both = run_both(pool, "print_argv x", helper_env(extra), cwd);
        CHECK(both.argvs.at(0)[0] == "print_argv");
        CHECK(parse_print_argv(both.ours.out) == parse_print_argv(both.sh.out));
      }
    }
  }
  leaks.verify();
}

TEST_CASE("through a pool, sh does the search when there is no PATH", "[command][direct]") {
  TEST_SKIP_UNLESS(have_dash(), "/bin/dash is not installed");
  LeakCheck leaks;
  {
    TempDir dir;
    Pool pool(pool_options(1));
    const Both search = run_both(pool, "ls /", {"LC_ALL=C"}, dir.path());
    CHECK(search.ours == search.sh);
    CHECK(search.argvs.at(0)[0] == "sh");
    const Both path = run_both(pool, "/bin/ls /", {"LC_ALL=C"}, dir.path());
    CHECK(path.ours == path.sh);
    CHECK(path.argvs.at(0)[0] == "/bin/ls");
  }
  leaks.verify();
}

TEST_CASE("through a pool, the group signals stay -N", "[command][direct]") {
  // A documented difference: INT/TERM/HUP normally reach the whole group, shell
  // included, and sh then dies of them too (-N); direct exec reports -N even when the
  // program alone got the signal, where sh would say 128+N.
  const int signum = GENERATE(SIGINT, SIGTERM, SIGHUP);
  LeakCheck leaks;
  {
    TempDir dir;
    Pool pool(pool_options(1));
    const Both both = run_both(pool, "exit_as -" + std::to_string(signum), helper_env(), dir.path());
    CHECK(both.ours == Outcome{-signum, "", ""});
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test

namespace spawnpool::test {
namespace {

TEST_CASE("direct exec from many threads at once, in many directories", "[command][direct]") {
  TempDir dir;
  for (int d = 0; d < 80; ++d) fs::create_directory(dir / std::to_string(d));  // past the cache
  FakeLayer inner([](PreparedCommand& c) {
    return ran(c.command.argv[0] == "prog" ? -SIGSEGV : 1);
  });
  DirectExec direct(inner);
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 40; ++i) {
        const std::string cwd = dir / std::to_string((t * 40 + i) % 80);
        PreparedCommand command = sh("prog a", {"PATH=/bin"}, cwd);
        const Result r = direct.run(command);
        if (r.returncode == 128 + SIGSEGV && r.stderr_data == "Segmentation fault\n") ++right;
      }
    });
  for (std::thread& thread : threads) thread.join();
  CHECK(right == 320);
  for (const PreparedCommand& seen : inner.seen())
    CHECK(value_of(*seen.command.env, "PWD") == fs::canonical(seen.command.cwd).string());
}

}  // namespace
}  // namespace spawnpool::test
