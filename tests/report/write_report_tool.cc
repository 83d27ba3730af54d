// A test's way to the build report until `spawnpool report` exists everywhere the tests
// run: write_report_tool TRACE.json REPORT.html. Exit 0, or 1 with the sentence on stderr.
#include <cstdio>
#include <string>

#include "engine/src/report/build_report.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TRACE.json REPORT.html\n", argv[0]);
    return 2;
  }
  const std::string error = spawnpool::detail::write_build_report(argv[1], argv[2]);
  if (!error.empty()) {
    std::fprintf(stderr, "write_report_tool: %s\n", error.c_str());
    return 1;
  }
  return 0;
}
