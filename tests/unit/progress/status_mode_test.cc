// Which status a build gets (status_mode.h): the option, whether the descriptor is a
// terminal, TERM and CLICOLOR_FORCE; and the printer's options from the locale and xterm.
#include <catch2/catch.hpp>
#include <pty.h>
#include <stdlib.h>
#include <unistd.h>

#include <optional>
#include <string>

#include "engine/src/progress/status_mode.h"

using namespace spawnpool::detail;

namespace {

// A terminal (a pseudo-terminal's follower) and a pipe, closed at the end of the test.
struct Descriptors {
  int leader = -1, terminal = -1, pipe_read = -1, pipe_write = -1;
  Descriptors() {
    REQUIRE(openpty(&leader, &terminal, nullptr, nullptr, nullptr) == 0);
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    pipe_read = fds[0];
    pipe_write = fds[1];
  }
  ~Descriptors() {
    for (int fd : {leader, terminal, pipe_read, pipe_write}) close(fd);
  }
};

TerminalConventions conventions(const char* term, bool forced = false) {
  TerminalConventions c;
  c.term = term;
  c.clicolor_force = forced;
  return c;
}

}  // namespace

TEST_CASE("auto: a line on a terminal, nothing into a pipe") {
  Descriptors fds;
  CHECK(status_mode("auto", fds.terminal, conventions("xterm-256color")) == StatusMode::kLine);
  CHECK(status_mode("", fds.terminal, conventions("screen")) == StatusMode::kLine);
  CHECK(status_mode("auto", fds.pipe_write, conventions("xterm")) == std::nullopt);
}

TEST_CASE("a dumb or unnamed terminal gets plain lines, never escape codes") {
  Descriptors fds;
  CHECK(status_mode("auto", fds.terminal, conventions("dumb")) == StatusMode::kPlain);
  CHECK(status_mode("line", fds.terminal, conventions("")) == StatusMode::kPlain);
}

TEST_CASE("line into a pipe: plain, unless CLICOLOR_FORCE asks for escape codes") {
  Descriptors fds;
  CHECK(status_mode("line", fds.pipe_write, conventions("xterm")) == StatusMode::kPlain);
  CHECK(status_mode("line", fds.pipe_write, conventions("xterm", true)) == StatusMode::kLine);
  CHECK(status_mode("auto", fds.pipe_write, conventions("dumb", true)) == StatusMode::kLine);
}

TEST_CASE("plain and off are what they say anywhere, whatever the case and blanks around them") {
  Descriptors fds;
  for (int fd : {fds.terminal, fds.pipe_write}) {
    CHECK(status_mode("plain", fd, conventions("xterm", true)) == StatusMode::kPlain);
    CHECK(status_mode(" OFF\n", fd, conventions("xterm", true)) == std::nullopt);
  }
  CHECK(valid_status_setting(" Line "));
  CHECK_FALSE(valid_status_setting("yes"));
  CHECK_FALSE(valid_status_setting(""));
}

TEST_CASE("the environment: TERM, CLICOLOR_FORCE, the first locale variable set, xterm") {
  const char* names[] = {"TERM", "CLICOLOR_FORCE", "LC_ALL", "LC_CTYPE", "LANG", "XTERM_VERSION"};
  std::optional<std::string> saved[6];
  for (int i = 0; i < 6; ++i)
    if (const char* value = getenv(names[i])) saved[i] = value;
  setenv("TERM", "tmux-256color", 1);
  setenv("CLICOLOR_FORCE", "0", 1);
  unsetenv("LC_ALL");
  setenv("LC_CTYPE", "C", 1);        // the first one set decides: not UTF-8
  setenv("LANG", "en_US.UTF-8", 1);
  unsetenv("XTERM_VERSION");
  TerminalConventions c = TerminalConventions::from_environment();
  CHECK(c.term == "tmux-256color");
  CHECK_FALSE(c.clicolor_force);
  CHECK_FALSE(c.utf8);
  CHECK(c.reflows);
  setenv("CLICOLOR_FORCE", "1", 1);
  unsetenv("LC_CTYPE");
  setenv("XTERM_VERSION", "XTerm(379)", 1);
  c = TerminalConventions::from_environment();
  CHECK(c.clicolor_force);
  CHECK(c.utf8);                      // LANG
  CHECK_FALSE(c.reflows);             // xterm cuts lines instead
  const StatusPrinterOptions options = status_printer_options(StatusMode::kPlain, 2, c);
  CHECK(options.fd == 2);
  CHECK(options.mode == StatusMode::kPlain);
  CHECK(options.unicode);
  CHECK_FALSE(options.terminal_reflows);
  for (int i = 0; i < 6; ++i) {
    if (saved[i]) setenv(names[i], saved[i]->c_str(), 1);
    else unsetenv(names[i]);
  }
}
