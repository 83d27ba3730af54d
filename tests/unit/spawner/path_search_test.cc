// search_path: the spawner finds a command's program as execvp() would, in the PATH of
// the command's own environment, seen from the command's cwd. The programs found are
// copies of the exit_with helper; the test then runs the match it found.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/unit/spawner/spawner_test_support.h"
#include "worker_pool/spawner/path_search.h"

namespace spawnpool::test {
namespace {

namespace fs = std::filesystem;

// A directory tree with a program `tool` in bin/ (executable), a file `tool` in text/
// (not executable) and a directory `tool` in dir/.
struct ToolTree {
  TempDir root;
  ToolTree() {
    for (const char* d : {"bin", "text", "dir", "dir/tool"}) fs::create_directory(root / d);
    fs::copy_file(helper("exit_with"), root / "bin/tool");
    fs::copy_file(helper("exit_with"), root / "text/tool");
    chmod((root / "bin/tool").c_str(), 0755);
    chmod((root / "text/tool").c_str(), 0644);
  }
};

std::string search(const std::string& name, const std::vector<std::string>& env,
                   const char* cwd, int& error_number) {
  std::vector<std::string> storage = env;
  std::vector<char*> envp;
  for (auto& e : storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  error_number = 0;
  return detail::search_path(name.c_str(), envp.data(), cwd, error_number);
}

TEST_CASE("PATH search finds the program as execvp would", "[spawner][path]") {
  ToolTree tree;
  const std::string& root = tree.root.path();
  int error = 0;

  SECTION("the first executable match, past a file it cannot run and a directory") {
    const std::string found =
        search("tool", {"PATH=" + root + "/text:" + root + "/dir:" + root + "/bin"}, nullptr,
               error);
    CHECK(found == root + "/bin/tool");
    // And it is the program: it runs.
    HelperChild child("exit_with");
    child.setup().path = found.c_str();
    const detail::ChildStart started = detail::start_child(child.setup());
    REQUIRE(started.pid > 0);
    CHECK(reap(started.pid) == 0);
  }
  SECTION("only matches it cannot run: EACCES") {
    CHECK(search("tool", {"PATH=" + root + "/text:" + root + "/dir"}, nullptr, error).empty());
    CHECK(error == EACCES);
  }
  SECTION("no match: ENOENT") {
    CHECK(search("tool", {"PATH=" + root + "/none"}, nullptr, error).empty());
    CHECK(error == ENOENT);
  }
  SECTION("the PATH of the command's environment, not the spawner's") {
    CHECK(search("tool", {"HOME=/", "PATH=" + root + "/bin"}, nullptr, error) ==
          root + "/bin/tool");
    CHECK(search("tool", {}, nullptr, error).empty());  // /bin:/usr/bin have no tool
    CHECK(search("sh", {}, nullptr, error) == "/bin/sh");
  }
  SECTION("relative and empty entries are seen from the command's cwd, and stay relative") {
    CHECK(search("tool", {"PATH=text:bin"}, root.c_str(), error) == "bin/tool");
    const std::string bin = root + "/bin";
    CHECK(search("tool", {"PATH=/nonexistent:"}, bin.c_str(), error) == "tool");
  }
  SECTION("a name with a slash is not searched") {
    CHECK(search("./tool", {"PATH=" + root + "/bin"}, nullptr, error) == "./tool");
    CHECK(error == 0);
  }
}

}  // namespace
}  // namespace spawnpool::test
