// The trace and the report a session records (engine/src/stack/trace_recording.h): the
// report drawn at finish() from the trace asked for, or from a temporary one that no way
// the session ends leaves behind; every problem one warning, the build going on.
#include <dirent.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/src/stack/session.h"
#include "tests/unit/command/command_test_support.h"

namespace spawnpool::test {
namespace {

using detail::Session;
using detail::SessionOptions;

// The entries of `dir` (without . and ..).
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (const dirent* e = readdir(d)) {
      const std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(name);
    }
    closedir(d);
  }
  return names;
}

// $TMPDIR set to `dir` while it lives (the session's temporary trace goes there).
class TmpdirSet {
 public:
  explicit TmpdirSet(const std::string& dir) {
    if (const char* old = std::getenv("TMPDIR")) old_ = old, had_ = true;
    setenv("TMPDIR", dir.c_str(), 1);
  }
  ~TmpdirSet() {
    if (had_) setenv("TMPDIR", old_.c_str(), 1);
    else unsetenv("TMPDIR");
  }

 private:
  std::string old_;
  bool had_ = false;
};

Result ran(detail::PreparedCommand&) {
  Result r;
  r.returncode = 0;
  r.slot = 0;
  return r;
}

Command sh(const std::string& line) {
  return sh_line(line, {"PATH=/usr/bin:/bin"}, OutputMode::kCapture);
}

struct Warnings {
  std::vector<std::string> seen;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& w) { seen.push_back(w); };
  }
};

TEST_CASE("a report alone: recorded in a temporary trace that is never left behind",
          "[stack][report]") {
  TempDir dir, tmp;
  TmpdirSet tmpdir(tmp.path());
  FakeLayer base(ran);
  Warnings warnings;
  SessionOptions options;
  options.report_path = dir / "report.html";
  options.trace_command_line = "driver --report report.html";
  options.warn = warnings.sink();
  {
    Session session(base, options);
    REQUIRE(session.trace() != nullptr);  // recorded, for the report
    CHECK(entries(tmp.path()).empty());   // no name to remove, however the driver ends
    session.run(sh("gcc -o a.o -c a.c"));
    session.finish();
    session.finish();  // idempotent
  }
  CHECK(warnings.seen.empty());
  const std::string page = read_file(dir / "report.html");
  CHECK(page.find("gcc -o a.o -c a.c") != std::string::npos);
  CHECK(page.find("driver --report report.html") != std::string::npos);
  CHECK(entries(tmp.path()).empty());
}

TEST_CASE("a session that never finishes leaves no temporary trace, even killed",
          "[stack][report]") {
  TempDir dir, tmp;
  TmpdirSet tmpdir(tmp.path());
  FakeLayer base(ran);
  SessionOptions options;
  options.report_path = dir / "report.html";
  {
    Session session(base, options);  // gone without finish(): an exception, say
    session.run(sh("true"));
  }
  CHECK(entries(tmp.path()).empty());
  CHECK(entries(dir.path()).empty());  // and no report
  // A driver killed mid-build.
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    Session session(base, options);
    (void)!write(ready[1], "x", 1);
    pause();
    _exit(0);
  }
  char byte;
  close(ready[1]);
  REQUIRE(read(ready[0], &byte, 1) == 1);
  close(ready[0]);
  kill(child, SIGKILL);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(entries(tmp.path()).empty());
}

TEST_CASE("a report from the trace asked for", "[stack][report]") {
  TempDir dir;
  FakeLayer base(ran);
  SessionOptions options;
  options.trace_path = dir / "build.trace.json";
  options.report_path = dir / "report.html";
  Session session(base, options);
  session.run(sh("gcc -c b.c"));
  session.finish();
  CHECK(read_file(dir / "build.trace.json").find("gcc -c b.c") != std::string::npos);
  CHECK(read_file(dir / "report.html").find("gcc -c b.c") != std::string::npos);
}

TEST_CASE("what cannot be recorded or written is one warning, and the build goes on",
          "[stack][report]") {
  TempDir dir;
  FakeLayer base(ran);
  Warnings warnings;
  SessionOptions options;
  options.warn = warnings.sink();
  options.option_prefix = "--process-spawner-";
  // Without a trace: one warning as the session is made, the command runs, finish()
  // says nothing more, no file is left.
  const auto goes_on_without = [&](const std::string& warning) {
    Session session(base, options);
    CHECK(warnings.seen == std::vector<std::string>{warning});
    CHECK(session.trace() == nullptr);
    CHECK(session.run(sh("true")).returncode == 0);
    session.finish();
    CHECK(warnings.seen.size() == 1);
    CHECK(entries(dir.path()).empty());
  };

  SECTION("an unwritable report") {
    options.report_path = dir / "no-such-dir/report.html";
    Session session(base, options);
    CHECK(session.run(sh("true")).returncode == 0);
    CHECK(warnings.seen.empty());
    session.finish();
    REQUIRE(warnings.seen.size() == 1);
    CHECK(warnings.seen[0].rfind("--process-spawner-report: cannot write " + dir.path(), 0) == 0);
  }
  SECTION("no temporary directory") {
    TmpdirSet tmpdir(dir / "missing");
    options.report_path = dir / "report.html";
    goes_on_without("--process-spawner-report: cannot record the build in " + dir / "missing" +
                    ": No such file or directory");
  }
  SECTION("an unwritable trace: no report either") {
    options.trace_path = dir / "no-such-dir/trace.json";
    options.report_path = dir / "report.html";
    goes_on_without("--process-spawner-trace: cannot write " + dir / "no-such-dir/trace.json" +
                    ": No such file or directory; no report either");
  }
}

}  // namespace
}  // namespace spawnpool::test
