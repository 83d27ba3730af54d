// The jobserver client against jobservers made here as make makes them (a pipe in both
// MAKEFLAGS spellings, a fifo): the implicit slot, tokens taken up to what make allows
// and every one given back (the same bytes), return_all(), the destructor, make's own
// descriptors left alone, and unusable jobservers (closed fds, not a pipe, a malformed
// option): one command at a time, the reason said once. Each case ends with the same
// open fds as it began.
#include "spawnpool/jobserver.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <string>

#include "engine/src/jobserver/makeflags.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/make_jobserver.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool {
namespace {

using detail::JobserverAuth;
using detail::parse_makeflags;
using test::MakeJobserver;

TEST_CASE("MAKEFLAGS: the three spellings, the last one wins, -- ends the options",
          "[jobserver][makeflags]") {
  using Style = JobserverAuth::Style;
  struct Row {
    const char* makeflags;
    Style style;
    int r, w;
    const char* text;
  };
  const Row rows[] = {
      {"", Style::kNone, -1, -1, ""},
      {" -j4", Style::kNone, -1, -1, ""},
      {" -j4 --jobserver-auth=3,4", Style::kPipe, 3, 4, "3,4"},
      {"s -j4 --jobserver-fds=5,6", Style::kPipe, 5, 6, "5,6"},
      {"-j4 --jobserver-auth=fifo:/tmp/GMfifo1234", Style::kFifo, -1, -1, "/tmp/GMfifo1234"},
      {"-j4 --jobserver-auth=3,4 --jobserver-auth=fifo:/x", Style::kFifo, -1, -1, "/x"},
      {"-j4 -- X=--jobserver-auth=3,4", Style::kNone, -1, -1, ""},
      {"-j4 --jobserver-auth=-2,-2", Style::kInvalid, -1, -1, "-2,-2"},
      {"-j4 --jobserver-auth=junk", Style::kInvalid, -1, -1, "junk"},
      {"-j4 --jobserver-auth=fifo:", Style::kInvalid, -1, -1, "fifo:"},
      {"-j4 --jobserver-auth=3,", Style::kInvalid, -1, -1, "3,"},
  };
  for (const Row& row : rows) {
    INFO(row.makeflags);
    const JobserverAuth auth = parse_makeflags(row.makeflags);
    CHECK(auth.style == row.style);
    if (row.style == Style::kNone) continue;
    CHECK(auth.text == row.text);
    if (row.style == Style::kPipe) {
      CHECK(auth.read_fd == row.r);
      CHECK(auth.write_fd == row.w);
    }
  }
  CHECK(Jobserver::from_makeflags(" -j4") == nullptr);
}

TEST_CASE("tokens: the implicit slot first, then make's, every byte given back",
          "[jobserver]") {
  test::LeakCheck leaks;
  test::TempDir dir;
  const auto style = GENERATE(MakeJobserver::Style::kPipe, MakeJobserver::Style::kOldPipe,
                              MakeJobserver::Style::kFifo);
  {
    MakeJobserver make(4, style, dir / "fifo");  // -j4: tokens a, b, c
    INFO(make.makeflags());
    const int make_flags = fcntl(make.read_fd(), F_GETFL);
    std::shared_ptr<Jobserver> client = Jobserver::from_makeflags(make.makeflags());
    REQUIRE(client);
    REQUIRE(client->usable());
    CHECK(client->problem().empty());
    CHECK(client->poll_fd() >= 0);

    CHECK(client->try_acquire());  // the implicit slot: make's pipe untouched
    CHECK(make.tokens() == 3);
    CHECK(client->try_acquire());
    CHECK(client->try_acquire());
    CHECK(client->try_acquire());
    CHECK(make.tokens() == 0);
    CHECK(client->tokens_held() == 3);
    CHECK_FALSE(client->try_acquire());  // never more than make allows, and no wait
    CHECK(client->max_running() == 4);

    for (int i = 0; i < 4; ++i) client->release();
    CHECK(client->tokens_held() == 0);
    CHECK(make.tokens() == 3);       // the implicit slot is not a token
    std::string back = make.drain();
    std::sort(back.begin(), back.end());
    CHECK(back == "abc");            // the bytes read are the bytes given back
    CHECK(fcntl(make.read_fd(), F_GETFL) == make_flags);  // make's fd keeps its flags
  }
  leaks.verify();
}

TEST_CASE("return_all() and the destructor give make its tokens back, once",
          "[jobserver]") {
  test::LeakCheck leaks;
  {
    MakeJobserver make(3);  // tokens a, b
    std::shared_ptr<Jobserver> client = Jobserver::from_makeflags(make.makeflags());
    REQUIRE(client->try_acquire());
    REQUIRE(client->try_acquire());
    REQUIRE(client->try_acquire());
    CHECK(make.tokens() == 0);
    client->return_all();  // e.g. an interrupted build ends with commands still out
    CHECK(make.tokens() == 2);
    client->return_all();
    CHECK(make.tokens() == 2);
    // The commands that held them end: nothing more goes back, and the implicit slot is
    // still the last one's.
    client->release();
    client->release();
    CHECK(make.tokens() == 2);
    // The implicit slot's command still runs: a new command needs a token.
    REQUIRE(client->try_acquire());
    CHECK(make.tokens() == 1);
    client->release();
    CHECK(make.tokens() == 2);
    client->release();  // the implicit slot's command ends
    CHECK(make.tokens() == 2);

    REQUIRE(client->try_acquire());  // the implicit slot
    CHECK(make.tokens() == 2);
    REQUIRE(client->try_acquire());  // a token
    CHECK(make.tokens() == 1);
    client.reset();  // the destructor gives the token back
    CHECK(make.tokens() == 2);
  }
  leaks.verify();
}

TEST_CASE("an unusable jobserver: one command at a time, the reason said once",
          "[jobserver]") {
  test::LeakCheck leaks;
  test::TempDir dir;
  std::string makeflags, reason;
  bool has_hint = false;
  SECTION("closed fds (make 4.3's plain recipe line)") {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    close(fds[0]);
    close(fds[1]);
    makeflags = " -j4 --jobserver-auth=" + std::to_string(fds[0]) + "," + std::to_string(fds[1]);
    reason = "make's jobserver (fds " + std::to_string(fds[0]) + "," + std::to_string(fds[1]) +
             " in MAKEFLAGS) is unavailable: Bad file descriptor";
    has_hint = true;
  }
  SECTION("not a pipe") {
    const int file = open((dir / "plain").c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    REQUIRE(file >= 0);
    makeflags = " -j4 --jobserver-auth=" + std::to_string(file) + "," + std::to_string(file);
    reason = "fd " + std::to_string(file) + " is not a pipe";
    has_hint = true;
    std::shared_ptr<Jobserver> client = Jobserver::from_makeflags(makeflags);
    close(file);
    CHECK_FALSE(client->usable());
    CHECK(client->problem().find(reason) != std::string::npos);
    makeflags.clear();
  }
  SECTION("not a fifo") {
    makeflags = " -j4 --jobserver-auth=fifo:" + dir.path();
    reason = dir.path() + " is not a fifo";
  }
  SECTION("a malformed option") {
    makeflags = " -j4 --jobserver-auth=-2,-2";
    reason = "cannot parse the jobserver option '-2,-2' in MAKEFLAGS";
  }
  if (!makeflags.empty()) {
    std::shared_ptr<Jobserver> client = Jobserver::from_makeflags(makeflags);
    REQUIRE(client);
    CHECK_FALSE(client->usable());
    CHECK(client->poll_fd() == -1);
    CHECK(client->problem().find(reason) != std::string::npos);
    CHECK(client->hint().empty() != has_hint);
    CHECK(client->claim_warning());
    CHECK_FALSE(client->claim_warning());
    CHECK(client->try_acquire());        // the implicit slot
    CHECK_FALSE(client->try_acquire());  // and nothing else
    client->release();
    CHECK(client->try_acquire());
    client->release();
  }
  leaks.verify();
}

TEST_CASE("keep_from_commands() makes make's R,W close-on-exec", "[jobserver]") {
  MakeJobserver make(2);
  std::shared_ptr<Jobserver> client = Jobserver::from_makeflags(make.makeflags());
  REQUIRE(client->usable());
  CHECK((fcntl(make.read_fd(), F_GETFD) & FD_CLOEXEC) == 0);
  client->keep_from_commands();
  CHECK((fcntl(make.read_fd(), F_GETFD) & FD_CLOEXEC) != 0);
}

}  // namespace
}  // namespace spawnpool
