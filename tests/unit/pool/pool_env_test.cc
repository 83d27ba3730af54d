// What a command runs with: exactly the environment it was given (or the driver's at
// submit time), PATH looked up in that environment, and the working directory it was
// given (or the driver's at submit time).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

namespace fs = std::filesystem;

// Changes the test process's cwd for a scope.
class ChangedDirectory {
 public:
  explicit ChangedDirectory(const std::string& dir) : old_(fs::current_path()) {
    fs::current_path(dir);
  }
  ~ChangedDirectory() { fs::current_path(old_); }

 private:
  fs::path old_;
};

std::string canonical(const std::string& path) { return fs::canonical(path).string(); }

std::vector<std::string> env_of(Pool& pool, std::optional<std::vector<std::string>> env) {
  Command command = helper_command("print_env");
  command.env = std::move(env);
  const Result r = pool.run(command);
  REQUIRE(r.returncode == 0);
  return split_nul(r.stdout_data);
}

std::string cwd_of(Pool& pool, const std::string& cwd) {
  Command command = helper_command("child_state");
  command.cwd = cwd;
  const Result r = pool.run(command);
  INFO(r.error_message);
  REQUIRE(r.returncode == 0);
  return parse_lines(r.stdout_data).at("cwd");
}

TEST_CASE("the command gets exactly the environment it is given", "[pool][env]") {
  LeakCheck leaks;
  {
    Pool pool(pool_options(1));
    SECTION("some entries") {
      const std::vector<std::string> env = {"A=1", "B=two words", "EMPTY=", "EQ=a=b",
                                            "MULTI=line 1\nline 2", "Z=\xff\xfe"};
      CHECK(env_of(pool, env) == env);
    }
    SECTION("an empty environment") { CHECK(env_of(pool, std::vector<std::string>{}).empty()); }
    SECTION("a large environment") {
      std::vector<std::string> env;
      for (int i = 0; i < 2000; ++i)
        env.push_back("VAR_" + std::to_string(i) + "=" + std::string(100, 'v'));
      CHECK(env_of(pool, env) == env);
    }
  }
  leaks.verify();
}

TEST_CASE("without an environment the command gets the driver's at submit time", "[pool][env]") {
  LeakCheck leaks;
  {
    setenv("SPAWNPOOL_TEST_VALUE", "at pool start", 1);
    Pool pool(pool_options(1));
    setenv("SPAWNPOOL_TEST_VALUE", "at submit", 1);
    std::vector<std::string> mine;
    for (char** e = environ; *e; ++e) mine.emplace_back(*e);
    const auto env = env_of(pool, std::nullopt);
    unsetenv("SPAWNPOOL_TEST_VALUE");
    CHECK(env == mine);
    CHECK(std::count(env.begin(), env.end(), "SPAWNPOOL_TEST_VALUE=at submit") == 1);
  }
  leaks.verify();
}

TEST_CASE("the program is looked up in the PATH of the command's environment", "[pool][env]") {
  LeakCheck leaks;
  {
    TempDir dir;
    for (const char* sub : {"/first", "/second", "/rel/bin"})
      fs::create_directories(dir.path() + sub);
    // Only in dir/second; dir/first holds a same-named file that cannot be executed.
    REQUIRE(symlink(helper("exit_with").c_str(), (dir / "second/sp-tool").c_str()) == 0);
    std::ofstream(dir / "first/sp-tool") << "not executable\n";
    REQUIRE(symlink(helper("exit_with").c_str(), (dir / "rel/bin/sp-rel-tool").c_str()) == 0);
    Pool pool(pool_options(1));

    auto run_tool = [&](const std::string& name, const std::string& path,
                        const std::string& cwd = "") {
      Command command;
      command.argv = {name, "7"};
      command.env = std::vector<std::string>{"PATH=" + path};
      command.cwd = cwd;
      return pool.run(command);
    };
    SECTION("found in the command's PATH, not the driver's") {
      CHECK(run_tool("sp-tool", dir / "second").returncode == 7);
    }
    SECTION("a non-executable match earlier in PATH is skipped, as execvp does") {
      CHECK(run_tool("sp-tool", "/nonexistent:" + (dir / "first") + ":" + (dir / "second"))
                .returncode == 7);
    }
    SECTION("only a non-executable match: EACCES") {
      const Result r = run_tool("sp-tool", dir / "first");
      CHECK(r.failure == FailureStage::kExec);
      CHECK(r.error_number == EACCES);
    }
    SECTION("not in the command's PATH: ENOENT even though the driver could find it") {
      const Result r = run_tool("sp-tool", "/usr/bin:/bin");
      CHECK(r.failure == FailureStage::kExec);
      CHECK(r.error_number == ENOENT);
    }
    SECTION("a relative PATH entry is relative to the command's cwd") {
      CHECK(run_tool("sp-rel-tool", "rel/bin", dir.path()).returncode == 7);
    }
  }
  leaks.verify();
}

TEST_CASE("the command runs in the working directory it is given", "[pool][cwd]") {
  LeakCheck leaks;
  {
    TempDir dir;
    REQUIRE(mkdir((dir / "sub").c_str(), 0755) == 0);
    Pool pool(pool_options(1));
    SECTION("an absolute path") { CHECK(cwd_of(pool, dir / "sub") == canonical(dir / "sub")); }
    SECTION("a path with spaces") {
      REQUIRE(mkdir((dir / "with space").c_str(), 0755) == 0);
      CHECK(cwd_of(pool, dir / "with space") == canonical(dir / "with space"));
    }
    SECTION("no cwd: the driver's cwd at submit time, not at pool start") {
      ChangedDirectory in(dir.path());
      CHECK(cwd_of(pool, "") == canonical(dir.path()));
    }
    SECTION("a relative cwd is relative to the driver's cwd at submit time") {
      ChangedDirectory in(dir.path());
      CHECK(cwd_of(pool, "sub") == canonical(dir / "sub"));
    }
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
