// The progress line's text: the issue's example to the byte, the parts scripts parse,
// and what a narrow terminal cuts first.
#include <catch2/catch.hpp>

#include <regex>

#include "engine/src/progress/status_format.h"

using namespace spawnpool::detail;

namespace {

StatusView example() {
  StatusView view;
  view.done = 1212;
  view.total = 2080;
  view.elapsed_s = 41.2;
  view.remaining_s = 29.4;
  view.running = 2;
  view.waiting_for_memory = 1;
  view.longest_running = "cc -c big.c";
  view.longest_running_s = 12.7;
  return view;
}

}  // namespace

TEST_CASE("the status line reads as the issue shows it") {
  CHECK(format_status(example(), 0, true) ==
        "[1,212/2,080 58%] 0:41 elapsed, ~0:29 left \u00b7 2 running, 1 waiting for memory "
        "\u00b7 cc -c big.c (12s)");
  CHECK(format_status(example(), 0, false) ==
        "[1,212/2,080 58%] 0:41 elapsed, ~0:29 left - 2 running, 1 waiting for memory - "
        "cc -c big.c (12s)");
}

TEST_CASE("the head is what scripts parse: [DONE/TOTAL PCT%], elapsed, left") {
  const std::regex head(R"(^\[([0-9,]+)/([0-9,]+) ([0-9]+)%\] ([0-9:]+) elapsed, (~([0-9:]+) left|no estimate yet))");
  StatusView view = example();
  std::smatch m;
  std::string line = format_status(view, 0, false);
  REQUIRE(std::regex_search(line, m, head));
  CHECK(m[1] == "1,212");
  CHECK(m[6] == "0:29");
  view.remaining_s.reset();
  line = format_status(view, 0, false);
  REQUIRE(std::regex_search(line, m, head));
  CHECK(m[5] == "no estimate yet");
  view.remaining_s = 3725;
  view.elapsed_s = 4000;
  line = format_status(view, 0, false);
  REQUIRE(std::regex_search(line, m, head));
  CHECK(m[4] == "1:06:40");
  CHECK(m[6] == "1:02:05");
}

TEST_CASE("100% only when every command is done, and a total below done is raised") {
  StatusView view;
  view.done = 999;
  view.total = 1000;
  CHECK(format_status(view, 0, false).rfind("[999/1,000 99%]", 0) == 0);
  view.done = 1000;
  CHECK(format_status(view, 0, false).rfind("[1,000/1,000 100%]", 0) == 0);
  view.done = 1001;
  CHECK(format_status(view, 0, false).rfind("[1,001/1,001 100%]", 0) == 0);
  view.done = 0;
  view.total = 0;
  CHECK(format_status(view, 0, false).rfind("[0/0 0%]", 0) == 0);
}

TEST_CASE("a narrow terminal cuts the command first, then the activity, never the head") {
  const StatusView view = example();
  const std::string full = format_status(view, 0, false);
  for (std::size_t width = 20; width <= full.size() + 5; ++width) {
    const std::string line = format_status(view, width, false);
    INFO("width " << width << ": " << line);
    CHECK(line.size() <= width);
    if (width >= 44) CHECK(line.rfind("[1,212/2,080 58%] 0:41 elapsed, ~0:29 left", 0) == 0);
  }
  const std::string cut = format_status(view, 86, false);
  CHECK(cut.find("cc -c big.c") == std::string::npos);   // no room for 12 columns of it
  CHECK(cut.find("1 waiting for memory") != std::string::npos);
  StatusView long_command = view;
  long_command.longest_running = "g++ -c some/very/long/path/to/a/source/file/with/a/long/name.cc -o x.o";
  const std::string fitted = format_status(long_command, 120, false);
  CHECK(fitted.size() == 120);
  CHECK(fitted.find("...") != std::string::npos);
  CHECK(fitted.substr(fitted.size() - 6) == " (12s)");
}

TEST_CASE("command lines are shown on one line") {
  StatusView view = example();
  view.longest_running = "echo a\necho b";
  CHECK(format_status(view, 0, false).find("echo a echo b (12s)") != std::string::npos);
}

TEST_CASE("clock and thousands") {
  CHECK(format_clock(0) == "0:00");
  CHECK(format_clock(59.6) == "1:00");
  CHECK(format_clock(725) == "12:05");
  CHECK(format_clock(3600) == "1:00:00");
  CHECK(format_clock(-3) == "0:00");
  CHECK(group_thousands(0) == "0");
  CHECK(group_thousands(999) == "999");
  CHECK(group_thousands(1000) == "1,000");
  CHECK(group_thousands(1234567) == "1,234,567");
}
