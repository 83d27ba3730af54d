// A recorded build (progress_recording.h) replayed (progress_replay.h) gives the views
// the build itself gave at the same times: the offline tuning of the ETA
// (tests/unit/progress/eta_replay.cc) measures the shipped estimator.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/src/progress/build_progress.h"
#include "engine/src/progress/progress_recording.h"
#include "engine/src/progress/progress_replay.h"
#include "tests/unit/support/memory_test_support.h"

namespace spawnpool::detail {
namespace {

constexpr std::int64_t kMs = 1000000;

// A command with a fallback key writes a file: its output key, made up as the others.
CommandKey key(std::uint64_t n, std::uint64_t fallback = 0, std::uint64_t program = 7) {
  return {n, fallback, program, fallback ? 5000 + fallback : 0};
}

std::optional<Recording> read_file(const std::string& path, std::string* error = nullptr) {
  std::ifstream in(path);
  return read_recording(in, error);
}

TEST_CASE_METHOD(test::StoreFixture, "a replayed recording gives the views the build gave", "[progress][replay]") {
  const std::uint64_t targets = 42;
  {  // the last build of the targets: durations (exact and fallback) and its shape
    auto store = std::make_shared<HistoryStore>(path, test::store_options(20, 5000), warnings.sink());
    BuildProgress progress(store, targets, 0);
    for (std::uint64_t n = 1; n <= 6; ++n) {
      const std::uint64_t id = progress.submitted(key(n, 100 + n), "cmd");
      progress.started(id, kMs);
      progress.finished(id, false, static_cast<std::int64_t>(n) * 100 * kMs);
      store->record(key(n, 100 + n), 0, static_cast<std::int64_t>(n) * 100 * kMs);
    }
    progress.set_units_built(6);
    progress.finish(701 * kMs);  // the last command ended at 601 ms: a tail of 100 ms
  }
  auto store = std::make_shared<HistoryStore>(path, test::store_options(20, 5000), warnings.sink());
  const std::string recording = dir / "build.progress.rec";
  std::int64_t now = 1000 * kMs;
  BuildProgress live(store, 0, now);
  REQUIRE(live.record_to(recording, [&now] { return now; }));
  live.set_slots(2, false);
  // A build of the same targets: commands the history knows by exact key, one by its
  // fallback key only (a flag changed), one it does not know; some configuration
  // command before the begin (forgotten by it).
  const std::uint64_t before = live.submitted(key(99), "configure check");
  now += 10 * kMs;
  live.begin(targets, now);
  std::vector<std::int64_t> times;
  std::vector<StatusView> views;
  auto look = [&] {
    times.push_back(now);
    views.push_back(live.view(now));
  };
  look();
  // The driver's files to come: two the history knows (one of them only by the output
  // of a command whose line changed), one it does not.
  now += 5 * kMs;
  live.expect_outputs({5000 + 106, 5000 + 105, 5000 + 999});
  look();
  struct Step { std::uint64_t n, fallback; };
  const Step steps[] = {{2, 102}, {3, 103}, {77, 105}, {78, 0}, {6, 106}};
  std::vector<std::uint64_t> ids;
  for (const Step& step : steps) {
    now += 30 * kMs;
    live.set_expected_remaining(static_cast<std::uint64_t>(5 - ids.size() - 1));
    ids.push_back(live.submitted(key(step.n, step.fallback), "cmd"));
    live.started(ids.back(), now);
    look();
    if (ids.size() >= 2) {  // two at a time: the one before ends now
      now += 70 * kMs;
      live.finished(ids[ids.size() - 2], ids.size() == 3, 170 * kMs);
      look();
    }
  }
  live.finished(before, false, 5 * kMs);  // unknown since the begin: not counted
  now += 150 * kMs;
  live.finished(ids.back(), false, 350 * kMs);
  live.set_units_built(5);
  look();
  now += 5 * kMs;
  views.push_back(live.finish(now));
  times.push_back(now + 1);
  now += 20 * kMs;
  live.end_recording(now);

  std::string error;
  const std::optional<Recording> rec = read_file(recording, &error);
  INFO(error);
  REQUIRE(rec);
  CHECK(rec->start_ns == 1010 * kMs);
  CHECK(rec->end_ns == now);
  CHECK(rec->history.find_output(5000 + 106));
  CHECK_FALSE(rec->history.find_output(5000 + 999));
  REQUIRE(rec->history.find_build(targets));
  CHECK(rec->history.find_build(targets)->tail_ns == 100 * kMs);
  ProgressReplay replay(*rec);
  CHECK(replay.commands_run() == 5);
  bool some_estimate = false;
  for (std::size_t i = 0; i < times.size(); ++i) {
    INFO("view " << i << " at " << (times[i] - 1000 * kMs) / kMs << " ms");
    const StatusView again = replay.view_at(times[i]);
    CHECK(again.done == views[i].done);
    CHECK(again.total == views[i].total);
    CHECK(again.running == views[i].running);
    CHECK(again.elapsed_s == Approx(views[i].elapsed_s));
    REQUIRE(again.remaining_s.has_value() == views[i].remaining_s.has_value());
    if (again.remaining_s) {
      some_estimate = some_estimate || *again.remaining_s > 0;
      CHECK(*again.remaining_s == Approx(*views[i].remaining_s));
    }
  }
  CHECK(some_estimate);  // the history's durations were replayed, not only the counts
  ProgressReplay exact(*rec, true);  // the driver's count replaced by what ran
  CHECK(exact.view_at(rec->start_ns).total == 5);
  CHECK(exact.view_at(times[3]).total == 5);
  CHECK(views.back().done == 5);
  CHECK(warnings.messages().empty());
}

TEST_CASE("a recording that is not one, or is damaged, says which line", "[progress][replay]") {
  std::string error;
  std::istringstream empty("");
  CHECK_FALSE(read_recording(empty, &error));
  CHECK(error == "line 1: not a progress recording");
  std::istringstream bad("spawnpool-progress-recording 1\nB 5 0 0\nS 6 1 2\n");
  CHECK_FALSE(read_recording(bad, &error));
  CHECK(error == "line 3: bad S event");
  std::istringstream stray("spawnpool-progress-recording 1\nP 1 2 0\nL 3 4\n");
  CHECK_FALSE(read_recording(stray, &error));
  CHECK(error == "line 3: bad L event");  // a last build's command outside a begin
  std::istringstream unknown("spawnpool-progress-recording 1\nQ 1\n");
  CHECK_FALSE(read_recording(unknown, &error));
  CHECK(error == "line 2: unknown event 'Q'");
  std::istringstream ok("spawnpool-progress-recording 1\nB 5 0 0\nE 6 -\nE 7 3\nX 9\n");
  const std::optional<Recording> rec = read_recording(ok, &error);
  REQUIRE(rec);
  CHECK(rec->start_ns == 5);
  CHECK(rec->end_ns == 9);  // no end event: the finish
  REQUIRE(rec->events.size() == 4);
  CHECK_FALSE(rec->events[1].count);
  CHECK(rec->events[2].count == 3u);
  // The last build's tail, and a begin written before it was kept (none: 0).
  std::istringstream tails("spawnpool-progress-recording 1\nB 5 42 3 250\nL 1 10\nB 6 43 1\nL 2 0\nX 9\n");
  const std::optional<Recording> with_tails = read_recording(tails, &error);
  REQUIRE(with_tails);
  REQUIRE(with_tails->history.find_build(42));
  CHECK(with_tails->history.find_build(42)->tail_ns == 250);
  CHECK(with_tails->history.find_build(42)->units == 3);
  REQUIRE(with_tails->history.find_build(43));
  CHECK(with_tails->history.find_build(43)->tail_ns == 0);
}

TEST_CASE("recording to a file that cannot be written records nothing", "[progress][replay]") {
  test::TempDir dir;
  BuildProgress progress(nullptr, 0, 0);
  CHECK_FALSE(progress.record_to(dir / "no/such/dir/x.rec"));
  progress.end_recording(1);  // nothing to end
}

}  // namespace
}  // namespace spawnpool::detail
