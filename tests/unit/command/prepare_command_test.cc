// The door: prepare_command() makes the command final (absolute cwd, complete
// environment: the defaults are decided here) and reads it once into the fields the
// layers read.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/src/command/prepare_command.h"
#include "tests/unit/support/test_support.h"

extern char** environ;

namespace spawnpool::detail {
namespace {

namespace fs = std::filesystem;
using Words = std::vector<std::string>;

PreparedCommand prepared(std::vector<std::string> argv) {
  Command command;
  command.argv = std::move(argv);
  command.env = std::vector<std::string>{"PATH=/bin"};
  return prepare_command(command);
}

TEST_CASE("the cwd is made absolute against the driver's now", "[command][prepare]") {
  test::TempDir dir;
  const fs::path before = fs::current_path();
  fs::current_path(dir.path());
  Command command;
  command.argv = {"true"};
  const std::string empty = prepare_command(command).command.cwd;
  command.cwd = "sub/dir";
  const std::string relative = prepare_command(command).command.cwd;
  command.cwd = "/absolute/elsewhere";
  const std::string absolute = prepare_command(command).command.cwd;
  fs::current_path(before);
  CHECK(fs::equivalent(empty, dir.path()));
  CHECK(relative.front() == '/');
  CHECK(fs::path(relative).parent_path().parent_path() == fs::path(empty));
  CHECK(absolute == "/absolute/elsewhere");
}

TEST_CASE("no environment is the driver's at the door, and one given is kept", "[command][prepare]") {
  setenv("SPAWNPOOL_TEST_DOOR", "before", 1);
  Command command;
  command.argv = {"true"};
  setenv("SPAWNPOOL_TEST_DOOR", "at the door", 1);
  const PreparedCommand inherited = prepare_command(command);
  setenv("SPAWNPOOL_TEST_DOOR", "after", 1);
  std::vector<std::string> mine;
  for (char** e = environ; *e; ++e) mine.emplace_back(*e);
  REQUIRE(inherited.command.env);
  const std::vector<std::string>& env = *inherited.command.env;
  CHECK(env.size() == mine.size());
  CHECK(env[environment_index(env, "SPAWNPOOL_TEST_DOOR")] == "SPAWNPOOL_TEST_DOOR=at the door");
  unsetenv("SPAWNPOOL_TEST_DOOR");
  command.env = std::vector<std::string>{"A=1"};
  CHECK(*prepare_command(command).command.env == Words{"A=1"});
}

TEST_CASE("environment entries are found by name", "[command][prepare]") {
  const Words env = {"PATHS=x", "PATH", "PATH=/bin", "P=1"};
  CHECK(environment_index(env, "PATH") == 2);
  CHECK(environment_index(env, "P") == 3);
  CHECK(environment_index(env, "HOME") == env.size());
}

TEST_CASE("a dash line without shell syntax is read into its words", "[command][prepare]") {
  const PreparedCommand p = prepared({"sh", "-c", "gcc -o 'a b.o' -c a.c"});
  CHECK(p.shell_line);
  CHECK(p.line == "gcc -o 'a b.o' -c a.c");
  CHECK(p.simple_words == Words{"gcc", "-o", "a b.o", "-c", "a.c"});
  CHECK(p.program == "gcc");
  CHECK(p.output == "a b.o");
  CHECK(p.compile);
  CHECK(p.compiler_offset == 0);
  CHECK_FALSE(p.launched);
  CHECK(p.local);
  CHECK(p.launcher_words.empty());
  CHECK(p.key.exact == 0);  // the pool makes it, when it keeps keys
}

TEST_CASE("other shell lines keep their line and have no words", "[command][prepare]") {
  const PreparedCommand syntax = prepared({"sh", "-c", "gcc -c a.c && touch stamp"});
  CHECK(syntax.shell_line);
  CHECK(syntax.simple_words.empty());
  CHECK(syntax.compile);
  const PreparedCommand bash = prepared({"bash", "-c", "gcc -c a.c"});
  CHECK(bash.shell_line);
  CHECK(bash.line == "gcc -c a.c");
  CHECK(bash.simple_words.empty());  // direct exec follows dash, not bash
  CHECK(bash.compile);               // the launcher works in any of them
  const PreparedCommand options = prepared({"sh", "-ec", "gcc -c a.c"});
  CHECK(options.shell_line);
  CHECK(options.simple_words.empty());
}

TEST_CASE("an argv is joined into its line", "[command][prepare]") {
  const PreparedCommand p = prepared({"/usr/bin/g++", "-c", "a b.cc"});
  CHECK_FALSE(p.shell_line);
  CHECK(p.line == "/usr/bin/g++ -c a b.cc");
  CHECK(p.simple_words.empty());
  CHECK(p.program_name == "g++");
  CHECK(p.compile);
  const PreparedCommand python = prepared({"python3", "-c", "print(1)"});
  CHECK_FALSE(python.shell_line);
  CHECK(python.line == "python3 -c print(1)");
  const PreparedCommand none = prepared({});
  CHECK(none.line.empty());
  CHECK(none.program.empty());
}

}  // namespace
}  // namespace spawnpool::detail
