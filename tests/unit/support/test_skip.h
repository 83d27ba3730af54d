// A test case that cannot run here says so and is counted as skipped, never as passed
// (Catch2 v2 has no SKIP of its own). test_skip() notes the reason for test_main.cc,
// which prints every skipped case with its reason and exits with kSkipExitCode when
// all the cases it ran were skipped: ctest, which runs one case per process
// (catch_discover_tests), registers that code as SKIP_RETURN_CODE. Main thread only.
#pragma once

#include <sstream>
#include <string>

namespace spawnpool::test {

/// The exit code of a test process whose cases were all skipped (automake's 77).
inline constexpr int kSkipExitCode = 77;

/// Marks the running test case skipped with `why` (its body then returns at once:
/// use TEST_SKIP_UNLESS). A case that also fails counts as failed.
void test_skip(const std::string& why);

}  // namespace spawnpool::test

/// Skips the running test case with the reason `why` (streamable) unless `condition`.
#define TEST_SKIP_UNLESS(condition, why)                \
  do {                                                  \
    if (!(condition)) {                                 \
      std::ostringstream test_skip_why_;                \
      test_skip_why_ << why;                            \
      ::spawnpool::test::test_skip(test_skip_why_.str()); \
      return;                                           \
    }                                                   \
  } while (false)
