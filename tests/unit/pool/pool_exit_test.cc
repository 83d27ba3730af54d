// How a command ends, as data: exit codes, -N for signals, launch failures with their
// stage and errno, and requests refused before anything runs.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

void write_file(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path) << text;
  REQUIRE(chmod(path.c_str(), mode) == 0);
}

TEST_CASE("exit codes come back unchanged", "[pool][exit]") {
  const int code = GENERATE(0, 1, 2, 127, 255);
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const Result r = pool.run(helper_command("exit_with", {std::to_string(code)}));
    CHECK(r.started());
    CHECK(r.failure == FailureStage::kNone);
    CHECK(r.returncode == code);
    CHECK(r.error_number == 0);
    CHECK(r.error_message.empty());
    CHECK(r.captured);
    CHECK(r.stdout_data.empty());
    CHECK(r.stderr_data.empty());
  }
  leaks.verify();
}

TEST_CASE("a command killed by signal N returns -N", "[pool][exit][signal]") {
  const int sig = GENERATE(SIGTERM, SIGKILL, SIGINT, SIGHUP, SIGUSR1, SIGPIPE);
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const Result r = pool.run(helper_command("kill_self", {std::to_string(sig)}));
    CHECK(r.started());
    CHECK(r.returncode == -sig);
  }
  leaks.verify();
}

TEST_CASE("results carry resource usage and consistent timestamps", "[pool][exit]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const Result r = pool.run(helper_command("sleep_ms", {"50"}));
    REQUIRE(r.returncode == 0);
    CHECK(r.max_rss_kb > 0);
    CHECK(r.user_time >= 0);
    CHECK(r.system_time >= 0);
    CHECK(r.wall_time >= 0.04);   // it slept 50 ms
    CHECK(r.wall_time < 30);      // generous: a loaded machine is slow, not this slow
    CHECK(r.submitted_ns > 0);
    // One clock for driver and spawner: each step follows the one before.
    CHECK(r.submitted_ns <= r.dispatched_ns);
    CHECK(r.dispatched_ns <= r.received_ns);
    CHECK(r.received_ns <= r.launch_ns);
    CHECK(r.launch_ns <= r.started_ns);
    CHECK(r.started_ns <= r.exited_ns);
    CHECK(r.exited_ns <= r.completed_ns);
  }
  leaks.verify();
}

TEST_CASE("launch failures report their stage and errno", "[pool][exec]") {
  LeakCheck leaks;
  {
    TempDir dir;
    write_file(dir / "plain-file", "not a program\n", 0644);
    write_file(dir / "garbage", "echo no shebang, so exec refuses it\n", 0755);
    REQUIRE(mkdir((dir / "subdir").c_str(), 0755) == 0);
    Pool pool(pool_options(1));

    struct Case {
      std::string name;
      std::string program;
      std::string cwd;
      FailureStage stage;
      int error_number;
      std::string named;  // what the message must mention
    };
    const Case cases[] = {
        {"missing program (path)", dir / "missing", "", FailureStage::kExec, ENOENT,
         dir / "missing"},
        {"missing program (PATH search)", "spawnpool-no-such-program-x", "",
         FailureStage::kExec, ENOENT, "spawnpool-no-such-program-x"},
        {"file without execute permission", dir / "plain-file", "", FailureStage::kExec,
         EACCES, dir / "plain-file"},
        {"directory as program", dir / "subdir", "", FailureStage::kExec, EACCES,
         dir / "subdir"},
        {"executable that is no program", dir / "garbage", "", FailureStage::kExec, ENOEXEC,
         dir / "garbage"},
        {"missing cwd", helper("exit_with"), dir / "missing-dir", FailureStage::kChdir, ENOENT,
         dir / "missing-dir"},
        {"cwd that is a file", helper("exit_with"), dir / "plain-file", FailureStage::kChdir,
         ENOTDIR, dir / "plain-file"},
        {"bad cwd and missing program: cwd first", dir / "missing", dir / "missing-dir",
         FailureStage::kChdir, ENOENT, dir / "missing-dir"},
    };
    for (const Case& c : cases) {
      SECTION(c.name) {
        Command command;
        command.argv = {c.program, "0"};
        command.cwd = c.cwd;
        const Result r = pool.run(command);
        CHECK_FALSE(r.started());
        CHECK(r.returncode == -1);
        CHECK(r.failure == c.stage);
        CHECK(r.error_number == c.error_number);
        CHECK_THAT(r.error_message, Catch::Contains(c.named) &&
                                        Catch::Contains(std::strerror(c.error_number)));
        // A failed launch leaves the spawner ready for the next command.
        CHECK(pool.run(helper_command("exit_with", {"3"})).returncode == 3);
      }
    }
    CHECK(stage_name(FailureStage::kExec) == std::string("exec"));
    CHECK(stage_name(FailureStage::kChdir) == std::string("chdir"));
  }
  leaks.verify();
}

TEST_CASE("requests exec would refuse are refused before anything runs", "[pool][request]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    const std::size_t kMaxArgStrlen = 32 * 4096;
    SECTION("NUL byte in an argument") {
      const Result r = pool.run(helper_command("exit_with", {std::string("0\0x", 3)}));
      CHECK(r.failure == FailureStage::kRequest);
      CHECK(r.error_number == EINVAL);
      CHECK_THAT(r.error_message, Catch::Contains("NUL"));
    }
    SECTION("NUL byte in the environment") {
      Command command = helper_command("exit_with", {"0"});
      command.env = std::vector<std::string>{std::string("A=1\0B=2", 7)};
      const Result r = pool.run(command);
      CHECK(r.failure == FailureStage::kRequest);
      CHECK(r.error_number == EINVAL);
    }
    SECTION("empty argv") {
      const Result r = pool.run(Command{});
      CHECK(r.failure == FailureStage::kRequest);
      CHECK(r.error_number == EINVAL);
    }
    SECTION("one argument over MAX_ARG_STRLEN") {
      const Result r =
          pool.run(helper_command("exit_with", {"0", std::string(kMaxArgStrlen, 'a')}));
      CHECK(r.failure == FailureStage::kRequest);
      CHECK(r.error_number == E2BIG);
      CHECK_THAT(r.error_message, Catch::Contains("argument 2"));
    }
    SECTION("the largest single argument runs") {
      const Result r =
          pool.run(helper_command("exit_with", {"4", std::string(kMaxArgStrlen - 1, 'a')}));
      CHECK(r.returncode == 4);
    }
    SECTION("arguments over ARG_MAX in total") {
      const std::size_t arg_max = static_cast<std::size_t>(sysconf(_SC_ARG_MAX));
      std::vector<std::string> args{"0"};
      for (std::size_t total = 0; total <= arg_max; total += 100000)
        args.push_back(std::string(100000, 'b'));
      const Result r = pool.run(helper_command("exit_with", args));
      CHECK(r.failure == FailureStage::kRequest);
      CHECK(r.error_number == E2BIG);
    }
    SECTION("arguments of more than a megabyte in total run") {
      std::vector<std::string> args{"5"};
      for (int i = 0; i < 12; ++i) args.push_back(std::string(100000, static_cast<char>('a' + i)));
      CHECK(pool.run(helper_command("exit_with", args)).returncode == 5);
    }
    // Nothing ran, and the slot is free again.
    CHECK(pool.run(helper_command("exit_with", {"6"})).returncode == 6);
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
