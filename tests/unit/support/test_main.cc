// The Catch2 main of every unit test binary: Catch2's own session, plus the skipped
// cases (test_skip.h) counted apart from the passed ones. At the end it prints one line
// per skipped case with its reason and a "cases: N passed, N failed, N skipped" line,
// and exits with kSkipExitCode when every case it ran was skipped and none failed.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tests/unit/support/test_skip.h"

namespace spawnpool::test {
namespace {

// A case with sections runs once per leaf section; it counts as skipped when every run
// skipped, and as passed (with a "PARTLY SKIPPED" line) when only some did.
struct SkipState {
  std::string current_reason;  // of the running case; "" while it has not skipped
  bool run_skipped = false;    // the current run of the case called test_skip()
  int depth = 0;               // of the sections open in the current run
  int runs = 0, skipped_runs = 0;
  std::vector<std::pair<std::string, std::string>> partly;  // case name, reason
  std::vector<std::pair<std::string, std::string>> skipped;  // case name, reason
  int passed = 0;
  int failed = 0;
};

SkipState& skip_state() {
  static SkipState state;
  return state;
}

class SkipListener : public Catch::TestEventListenerBase {
 public:
  using TestEventListenerBase::TestEventListenerBase;
  void testCaseStarting(const Catch::TestCaseInfo&) override {
    SkipState& state = skip_state();
    state.current_reason.clear();
    state.run_skipped = false;
    state.depth = state.runs = state.skipped_runs = 0;
  }
  void sectionStarting(const Catch::SectionInfo&) override { ++skip_state().depth; }
  void sectionEnded(const Catch::SectionStats&) override {
    SkipState& state = skip_state();
    if (--state.depth != 0) return;  // the case's own section closes each run
    ++state.runs;
    if (state.run_skipped) ++state.skipped_runs;
    state.run_skipped = false;
  }
  void testCaseEnded(const Catch::TestCaseStats& stats) override {
    SkipState& state = skip_state();
    if (!stats.totals.assertions.allOk() || stats.totals.testCases.failed > 0)
      ++state.failed;
    else if (state.skipped_runs > 0 && state.skipped_runs == state.runs)
      state.skipped.emplace_back(stats.testInfo.name, state.current_reason);
    else if (state.skipped_runs > 0)
      ++state.passed, state.partly.emplace_back(stats.testInfo.name, state.current_reason);
    else
      ++state.passed;
  }
};

CATCH_REGISTER_LISTENER(SkipListener)

}  // namespace

void test_skip(const std::string& why) {
  WARN("skipped: " << why);
  SkipState& state = skip_state();
  state.run_skipped = true;
  if (state.current_reason.empty()) state.current_reason = why;  // the first one
}

}  // namespace spawnpool::test

int main(int argc, char* argv[]) {
  Catch::Session session;
  if (const int bad = session.applyCommandLine(argc, argv)) return bad;
  const int result = session.run();
  const spawnpool::test::SkipState& state = spawnpool::test::skip_state();
  const int ran = state.passed + state.failed + static_cast<int>(state.skipped.size());
  if (ran == 0) return result;  // listing, or nothing matched
  for (const auto& [name, reason] : state.skipped)
    std::printf("SKIPPED: %s: %s\n", name.c_str(), reason.c_str());
  for (const auto& [name, reason] : state.partly)
    std::printf("PARTLY SKIPPED: %s: %s\n", name.c_str(), reason.c_str());
  std::printf("cases: %d passed, %d failed, %zu skipped\n", state.passed, state.failed,
              state.skipped.size());
  std::fflush(stdout);
  if (result == 0 && state.failed == 0 && state.passed == 0)
    return spawnpool::test::kSkipExitCode;
  return result;
}
