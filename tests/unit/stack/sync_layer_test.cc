// The sync layer (engine/src/stack/sync_layer.h): a passthrough command runs captured,
// merged when fds 1 and 2 are the same open file, and is printed as one block; a command
// its caller captures passes untouched; failures are Results. Then through a Session: the
// launcher's message after the command's block, and four driver threads on a real pool
// whose blocks come out whole, never interleaved.
#include <fcntl.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/src/command/prepare_command.h"
#include "engine/src/stack/session.h"
#include "engine/src/stack/sync_layer.h"
#include "tests/unit/command/command_test_support.h"
#include "tests/unit/support/leak_check.h"

namespace spawnpool::test {
namespace {

using detail::PreparedCommand;
using detail::Session;
using detail::SessionOptions;
using detail::SyncLayer;
using Words = std::vector<std::string>;

const Words kEnv = {"PATH=/usr/bin:/bin"};

PreparedCommand prepared(const std::string& line, OutputMode output,
                         const Words& env = kEnv) {
  return detail::prepare_command(sh_line(line, env, output));
}

/// Points fds 1 and 2 at one temporary file (the same open file, as `> log 2>&1`) for
/// its lifetime; text() reads what was written so far.
class MergedFds {
 public:
  MergedFds() : saved_out_(dup(1)), saved_err_(dup(2)) {
    const int file = open((dir_ / "merged").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(file, 1);
    dup2(file, 2);
    close(file);
  }
  ~MergedFds() {
    dup2(saved_out_, 1);
    dup2(saved_err_, 2);
    close(saved_out_);
    close(saved_err_);
  }
  MergedFds(const MergedFds&) = delete;
  MergedFds& operator=(const MergedFds&) = delete;
  std::string text() const { return read_file(dir_ / "merged"); }

 private:
  TempDir dir_;
  int saved_out_;
  int saved_err_;
};

TEST_CASE("a passthrough command is captured apart and printed as one block",
          "[stack][sync]") {
  FakeLayer base([](PreparedCommand&) { return ran(0, "out 1\nout 2\n", "err\n"); });
  CapturedFd out(1), err(2);  // two files: not merged
  SyncLayer layer(base);
  CHECK(layer.capture_mode() == OutputMode::kCapture);
  PreparedCommand command = prepared("cc -c a.c", OutputMode::kPassthrough);
  const Result r = layer.run(command);
  REQUIRE(base.seen().size() == 1);
  CHECK(base.seen()[0].command.output == OutputMode::kCapture);
  CHECK(out.text() == "out 1\nout 2\n");
  CHECK(err.text() == "err\n");
  // The bytes stay in the Result, in the form the command ran with (the trace above).
  CHECK(r.captured);
  CHECK(r.stdout_data == "out 1\nout 2\n");
  CHECK(command.command.output == OutputMode::kCapture);
}

TEST_CASE("with fds 1 and 2 the same file a command is captured merged", "[stack][sync]") {
  FakeLayer base([](PreparedCommand& c) {
    CHECK(c.command.output == OutputMode::kCaptureMerged);
    return ran(0, "o1\ne1\no2\n");  // one pipe: the bytes in the order they were written
  });
  MergedFds console;
  SyncLayer layer(base);
  CHECK(layer.capture_mode() == OutputMode::kCaptureMerged);
  PreparedCommand command = prepared("make_noise", OutputMode::kPassthrough);
  layer.run(command);
  CHECK(console.text() == "o1\ne1\no2\n");
}

TEST_CASE("a command its caller captures passes the sync layer untouched", "[stack][sync]") {
  FakeLayer base([](PreparedCommand&) { return ran(0, "mine", "also mine"); });
  CapturedFd out(1), err(2);
  SyncLayer layer(base, OutputMode::kCaptureMerged);
  for (const OutputMode mode : {OutputMode::kCapture, OutputMode::kCaptureMerged}) {
    PreparedCommand command = prepared("cc -c a.c", mode);
    const Result r = layer.run(command);
    CHECK(r.stdout_data == "mine");
    CHECK(r.stderr_data == "also mine");
    CHECK(command.command.output == mode);
  }
  const std::vector<PreparedCommand> seen = base.seen();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].command.output == OutputMode::kCapture);
  CHECK(seen[1].command.output == OutputMode::kCaptureMerged);
  CHECK(out.text().empty());
  CHECK(err.text().empty());
}

TEST_CASE("a failing or unstarted command through the sync layer is its Result",
          "[stack][sync]") {
  FakeLayer failing([](PreparedCommand&) { return ran(2, "", "a.c:1: error\n"); });
  FakeLayer unstarted([](PreparedCommand&) { return not_started(FailureStage::kExec, ENOENT); });
  CapturedFd out(1), err(2);
  SyncLayer on_failing(failing, OutputMode::kCapture);
  SyncLayer on_unstarted(unstarted, OutputMode::kCapture);
  PreparedCommand first = prepared("cc -c a.c", OutputMode::kPassthrough);
  PreparedCommand second = prepared("no-such-cc -c a.c", OutputMode::kPassthrough);
  const Result failed = on_failing.run(first);
  const Result never = on_unstarted.run(second);
  CHECK(failed.returncode == 2);
  CHECK(failed.started());
  CHECK(never.failure == FailureStage::kExec);
  CHECK(never.error_number == ENOENT);
  CHECK_FALSE(never.captured);
  CHECK(out.text().empty());
  CHECK(err.text() == "a.c:1: error\n");  // the failing one's block; nothing for the other
}

TEST_CASE("a session with output sync prints the block before the launcher's message",
          "[stack][sync][session]") {
  TempDir dir;
  write_script(dir / "mylauncher", "#!/bin/sh\nexit 126\n");
  FakeLayer base([](PreparedCommand&) { return ran(126, "the compile's output\n"); });
  MergedFds console;
  SessionOptions options;
  options.launcher = "mylauncher";
  options.driver_environment = Words{"PATH=" + dir.path()};
  options.message_prefix = "scons";
  options.output_sync = true;
  Session session(base, options);
  CHECK(session.output_sync());
  Command command = sh_line("gcc -c a.c", kEnv, OutputMode::kPassthrough);
  CHECK(session.run(command).returncode == 126);
  CHECK(console.text() ==
        "the compile's output\n"
        "scons: mylauncher could not be executed (exit 126) for: gcc -c a.c\n");
  // The checks run below the launcher, still synced.
  session.run(sh_line("cc -c conftest.c", kEnv, OutputMode::kPassthrough), true);
  REQUIRE(base.seen().size() == 2);
  CHECK(base.seen()[1].command.output == OutputMode::kCaptureMerged);
  FakeLayer plain_base;
  CHECK_FALSE(Session(plain_base, SessionOptions{}).output_sync());
}

// What command `tag` prints: `lines` numbered lines on stdout, each followed by one on
// stderr (merged: in that order in one block; apart: one block per stream).
std::string noisy_line(const std::string& tag, int lines) {
  return "i=0; while [ $i -lt " + std::to_string(lines) + " ]; do echo " + tag +
         " out $i; echo " + tag + " err $i >&2; i=$((i+1)); done";
}

std::string expected_block(const std::string& tag, int lines, const char* streams) {
  std::string text;
  for (int i = 0; i < lines; ++i)
    for (const char* s = streams; *s; ++s)
      text += tag + (*s == 'o' ? " out " : " err ") + std::to_string(i) + "\n";
  return text;
}

// Whether `text` is exactly the `blocks`, each whole, in some order (every block holds
// its own tag on each line, so finding each once and the sizes adding up says so).
bool whole_blocks(const std::string& text, const std::vector<std::string>& blocks) {
  std::size_t total = 0;
  for (const std::string& block : blocks) {
    const std::size_t at = text.find(block);
    if (at == std::string::npos || text.find(block, at + 1) != std::string::npos) return false;
    total += block.size();
  }
  return total == text.size();
}

TEST_CASE("four driver threads on a pool get their blocks whole, never interleaved",
          "[stack][sync][session]") {
  // 300 lines each: long enough that without the layer the commands' writes interleave
  // (checked: output_sync off failed every check, 3 runs of 3; with 40 lines some passed).
  constexpr int kThreads = 4, kCommands = 6, kLines = 300;
  LeakCheck leaks;
  for (const bool merged : {true, false}) {
    INFO((merged ? "fds 1 and 2 the same file" : "fds 1 and 2 apart"));
    std::vector<std::string> out_blocks, err_blocks;
    std::string out_text, err_text;
    {
      std::unique_ptr<MergedFds> same;
      std::unique_ptr<CapturedFd> out, err;
      if (merged) {
        same = std::make_unique<MergedFds>();
      } else {
        out = std::make_unique<CapturedFd>(1);
        err = std::make_unique<CapturedFd>(2);
      }
      Pool pool(pool_options(kThreads));
      SessionOptions options;
      options.output_sync = true;
      Session session(pool, options);
      std::vector<std::thread> threads;
      std::vector<int> failed(kThreads, 0);
      for (int t = 0; t < kThreads; ++t)
        threads.emplace_back([&session, &failed, t] {
          for (int c = 0; c < kCommands; ++c) {
            const std::string tag = "t" + std::to_string(t) + "c" + std::to_string(c);
            Command command = sh_line(noisy_line(tag, kLines), kEnv, OutputMode::kPassthrough);
            if (session.run(command).returncode != 0) ++failed[t];
          }
        });
      for (std::thread& thread : threads) thread.join();
      CHECK(failed == std::vector<int>(kThreads, 0));
      out_text = merged ? same->text() : out->text();
      err_text = merged ? "" : err->text();
    }
    for (int t = 0; t < kThreads; ++t)
      for (int c = 0; c < kCommands; ++c) {
        const std::string tag = "t" + std::to_string(t) + "c" + std::to_string(c);
        out_blocks.push_back(expected_block(tag, kLines, merged ? "oe" : "o"));
        if (!merged) err_blocks.push_back(expected_block(tag, kLines, "e"));
      }
    CHECK(whole_blocks(out_text, out_blocks));
    if (!merged) CHECK(whole_blocks(err_text, err_blocks));
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
