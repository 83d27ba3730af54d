// Where a build keeps its history (spawnpool::history_path, spawnpool/session.h), the one
// decision every front end asks: kept where the status line or memory admission reads it,
// off when asked, a named history nothing reads one warning; and the history it names in a
// tree where it cannot be made is one warning and a build without it.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

#include "spawnpool/pool.h"
#include "spawnpool/session.h"
#include "spawnpool/status.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

struct Decision {
  std::string path;
  std::vector<std::string> warnings;
};

Decision decide(HistoryOptions options) {
  Decision d;
  d.path = history_path(options, [&d](const std::string& w) { d.warnings.push_back(w); });
  return d;
}

TEST_CASE("the history is kept where the status line or memory admission reads it",
          "[stack][history]") {
  TempDir dir;
  HistoryOptions options;
  options.setting = "h.db";
  options.base_dir = dir.path();
  SECTION("status line shown") {
    options.status_shown = true;
    CHECK(decide(options).path == dir / "h.db");
  }
  SECTION("memory admission on") {
    options.memory = true;
    CHECK(decide(options).path == dir / "h.db");
  }
  SECTION("both: one history") {
    options.memory = options.status_shown = true;
    const Decision d = decide(options);
    CHECK(d.path == dir / "h.db");
    CHECK(d.warnings.empty());
  }
  SECTION("neither: none, and a named one is one warning") {
    options.option_prefix = "--process-spawner-";
    const Decision d = decide(options);
    CHECK(d.path.empty());
    CHECK(d.warnings == std::vector<std::string>{
              "--process-spawner-history: only used with --process-spawner-memory or "
              "--process-spawner-status; ignored"});
    options.setting.clear();
    options.default_path = ".spawnpool/";
    CHECK(decide(options).warnings.empty());  // the default is not the user's doing
  }
  SECTION("off, whatever reads it") {
    options.setting = " OFF ";
    options.memory = options.status_shown = true;
    const Decision d = decide(options);
    CHECK(d.path.empty());
    CHECK(d.warnings.empty());
    options.memory = options.status_shown = false;
    CHECK(decide(options).warnings.empty());
  }
}

TEST_CASE("the history's file: named, in a directory, the default, from the base",
          "[stack][history]") {
  TempDir dir;
  HistoryOptions options;
  options.base_dir = dir.path();
  options.memory = true;
  CHECK(decide(options).path.empty());  // none named, no default
  options.default_path = ".spawnpool/";
  CHECK(decide(options).path == dir / ".spawnpool/memory-history.sqlite");
  REQUIRE(mkdir((dir / "state").c_str(), 0700) == 0);
  options.setting = "state";
  CHECK(decide(options).path == dir / "state/memory-history.sqlite");
  options.setting = "/x/h.db";
  CHECK(decide(options).path == "/x/h.db");
  options.setting = "~/h.db";
  CHECK(decide(options).path == std::string(std::getenv("HOME")) + "/h.db");
  options.base_dir.clear();
  options.setting = "rel.db";
  CHECK(decide(options).path == "rel.db");  // the current directory's
}

TEST_CASE("a history that cannot be made is one warning and a build without it",
          "[stack][history]") {
  LeakCheck leaks;
  TempDir dir;
  std::ofstream(dir / ".spawnpool") << "not a directory\n";  // as a read-only tree, for root too
  HistoryOptions history;
  history.base_dir = dir.path();
  history.default_path = ".spawnpool/";
  history.status_shown = true;
  std::vector<std::string> warnings;
  const int devnull = open("/dev/null", O_WRONLY | O_CLOEXEC);
  REQUIRE(devnull >= 0);
  {
    StatusLine status("plain", devnull);
    PoolOptions options = pool_options(1);
    options.memory_history_path = history_path(history);
    CHECK(options.memory_history_path == dir / ".spawnpool/memory-history.sqlite");
    options.warn = [&warnings](const std::string& w) { warnings.push_back(w); };
    SessionOptions session_options;
    status.attach(options, session_options);
    Pool pool(options);
    Session session(pool, session_options);
    status.begin(dir.path(), {"all"});
    status.expect_outputs({dir / "out.o"});  // no history: nothing known, nothing claimed
    Command command;
    command.argv = {"/bin/true"};
    CHECK(session.run(command).returncode == 0);
    status.finish();
    session.finish();
  }
  close(devnull);
  CHECK(warnings.size() == 1);
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
