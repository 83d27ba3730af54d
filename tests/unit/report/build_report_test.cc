// The build report's page around a trace: the embedding is safe for any trace text, the
// page keeps its placeholder once, and write_build_report() reports its failures as
// sentences. What the page shows is tested in a real browser (tests/report/).
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "engine/src/report/build_report.h"
#include "tests/unit/support/test_support.h"

using spawnpool::detail::render_build_report;
using spawnpool::detail::write_build_report;

namespace {

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

}  // namespace

TEST_CASE("the report holds the trace, with every < escaped") {
  const std::string trace =
      R"({"traceEvents":[{"name":"echo </script><!-- x","ph":"X","cat":"command","ts":1,"dur":2,"tid":0,"args":{"command":"echo </script>"}}]})";
  const std::string page = render_build_report(trace);
  CHECK(page.find("@SPAWNPOOL_TRACE@") == std::string::npos);
  CHECK(page.find("echo \\u003c/script>\\u003c!-- x") != std::string::npos);
  // Only the page's own script elements end: the trace cannot close its element early.
  const auto data = page.find("id=\"trace-data\"");
  REQUIRE(data != std::string::npos);
  const auto close = page.find("</script>", data);
  CHECK(page.substr(data, close - data).find("<") == std::string::npos);
  CHECK(page.find("<!DOCTYPE html>") == 0);
}

TEST_CASE("write_build_report writes the page and names what failed") {
  spawnpool::test::TempDir dir;
  const std::string trace = dir.path() + "/trace.json";
  const std::string report = dir.path() + "/report.html";
  SECTION("a trace") {
    write_file(trace, "{\"traceEvents\":[\n],\"displayTimeUnit\":\"ms\"}\n");
    CHECK(write_build_report(trace, report).empty());
    CHECK(spawnpool::test::read_file(report).find("\"traceEvents\"") != std::string::npos);
  }
  SECTION("no trace file") {
    const std::string error = write_build_report(dir.path() + "/missing.json", report);
    CHECK(error.find("cannot read the trace") != std::string::npos);
    CHECK(error.find("missing.json") != std::string::npos);
  }
  SECTION("a file that is not a trace") {
    write_file(trace, "hello\n");
    CHECK(write_build_report(trace, report).find("is not a Chrome trace") != std::string::npos);
  }
  SECTION("a report path that cannot be written") {
    write_file(trace, "[]");
    const std::string error = write_build_report(trace, dir.path() + "/no/such/dir/r.html");
    CHECK(error.find("cannot write") != std::string::npos);
  }
}
