// The memory admission policy with fake memory and pressure sources, asked as the
// Scheduler asks it (on_submit, admit, on_dispatch, on_finish): fits or waits, progress
// with nothing running, pressure with hysteresis at a bounded rate, the OOM retry's floor,
// learned estimates, cold and warm history, the auto budget's re-measurement. The queue's
// rules (order, passing and its bound, exclusive jobs, memory-wait accounting, the recheck
// timer) are the Scheduler's: scheduler_test.cc tests them, with this policy too.
#include <catch2/catch.hpp>
#include <list>
#include <optional>
#include <vector>

#include "engine/src/admission/admission_policy.h"
#include "engine/src/admission/admission_policy_setup.h"
#include "engine/src/history/history_store_database.h"
#include "tests/unit/support/memory_test_support.h"

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;
constexpr std::uint64_t kGiB = std::uint64_t(1) << 30;
constexpr std::int64_t kMs = 1'000'000;

std::int64_t bytes(std::uint64_t n) { return static_cast<std::int64_t>(n); }

// The policy and the jobs the test submits, with the calls the Scheduler makes.
class Harness {
 public:
  struct Sources {
    std::optional<std::uint64_t> budget;  // explicit; unset: no budget at all
    HistorySnapshot history;
    const std::optional<double>* pressure = nullptr;
    std::unique_ptr<BudgetMeter> auto_budget;  // overrides `budget`
  };

  explicit Harness(Sources sources) {
    std::unique_ptr<BudgetMeter> budget = std::move(sources.auto_budget);
    if (!budget && sources.budget)
      budget = std::make_unique<BudgetMeter>(MemoryBudget::of_bytes(*sources.budget), nullptr,
                                             nullptr);
    std::unique_ptr<PressureSource> pressure;
    if (sources.pressure) pressure = std::make_unique<test::FakePressure>(sources.pressure, nullptr);
    policy_.emplace(AdmissionOptions{}, std::move(budget), std::move(pressure),
                    std::move(sources.history), now);
  }

  MemoryAdmissionPolicy& policy() { return *policy_; }

  /// A job of command `exact` (program `program`) arrives.
  JobInfo& submit(std::uint64_t exact, std::uint64_t program = 1) {
    JobInfo& job = jobs_.emplace_back();
    job.key.exact = exact;
    job.key.program = program;
    policy_->on_submit(job);
    return job;
  }
  Admission ask(JobInfo& job) { return policy_->admit(job, now); }
  /// Starts `job` if the policy admits it now.
  bool start(JobInfo& job) {
    if (ask(job) != Admission::kStart) return false;
    policy_->on_dispatch(job, 0);
    return true;
  }
  void finish(JobInfo& job, std::uint64_t peak, bool oom_killed = false) {
    Result result;
    result.returncode = 0;
    result.peak_memory_bytes = bytes(peak);
    result.oom_killed = oom_killed;
    policy_->on_finish(job, result);
  }

  std::int64_t now = 1'000'000 * kMs;

 private:
  std::optional<MemoryAdmissionPolicy> policy_;
  std::list<JobInfo> jobs_;  // stable addresses, as job states have
};

// A history in which command N (1..count) peaked at peaks[N-1].
HistorySnapshot history_of(const std::vector<std::uint64_t>& peaks) {
  HistorySnapshot history;
  for (std::size_t i = 0; i < peaks.size(); ++i)
    history.add(i + 1, 0, {bytes(peaks[i]), 1});
  return history;
}

Harness make(std::optional<std::uint64_t> budget, const std::vector<std::uint64_t>& peaks,
             const std::optional<double>* pressure = nullptr) {
  Harness::Sources sources;
  sources.budget = budget;
  sources.history = history_of(peaks);
  sources.pressure = pressure;
  return Harness(std::move(sources));
}

TEST_CASE("a job starts only if the running predictions plus its own fit the budget",
          "[memory][admission]") {
  Harness h = make(1000 * kMiB, {400 * kMiB, 400 * kMiB, 400 * kMiB, 200 * kMiB});
  JobInfo& a = h.submit(1);
  JobInfo& b = h.submit(2);
  JobInfo& c = h.submit(3);
  CHECK(a.predicted_peak_bytes == bytes(400 * kMiB));
  CHECK_FALSE(a.prediction_learned);  // measured: kept
  CHECK(h.start(a));
  CHECK(h.start(b));
  CHECK(b.predicted_in_use_bytes == bytes(800 * kMiB));
  CHECK(b.budget_bytes == bytes(1000 * kMiB));
  CHECK(h.policy().running_predicted_bytes() == 800 * kMiB);
  CHECK(h.ask(c) == Admission::kWait);  // 1200 > 1000: later jobs may pass it
  h.finish(a, 390 * kMiB);
  CHECK(h.start(c));
  JobInfo& d = h.submit(4);
  CHECK(h.start(d));  // 800 + 200 = 1000: fits exactly
  CHECK(h.policy().running_predicted_bytes() == 1000 * kMiB);
  CHECK(h.policy().running() == 3);
}

TEST_CASE("with nothing running the job starts, however large", "[memory][admission]") {
  Harness h = make(100 * kMiB, {500 * kMiB, 50 * kMiB});
  JobInfo& huge = h.submit(1);
  JobInfo& small = h.submit(2);
  CHECK(h.start(huge));
  CHECK(h.ask(small) == Admission::kWait);  // 500 + 50 > 100
  h.finish(huge, 480 * kMiB);
  CHECK(h.start(small));
}

TEST_CASE("memory pressure holds admissions back, with hysteresis, at a bounded rate",
          "[memory][admission][pressure]") {
  std::optional<double> pressure = 0.0;
  Harness h = make(std::nullopt, {}, &pressure);  // no budget: pressure alone
  JobInfo& first = h.submit(1);
  REQUIRE(h.start(first));
  pressure = 30.0;
  JobInfo& second = h.submit(2);
  CHECK(h.ask(second) == Admission::kHold);  // nothing may pass it either
  const std::optional<std::int64_t> recheck = h.policy().next_recheck_ns();
  REQUIRE(recheck);
  CHECK(*recheck == h.now + 500 * kMs);

  pressure = 0.0;
  h.now += 100 * kMs;
  CHECK(h.ask(second) == Admission::kHold);  // no new reading before the poll interval
  h.now = *recheck;
  pressure = 7.0;
  CHECK(h.ask(second) == Admission::kHold);  // below 10% but not below 5%
  h.now += 500 * kMs;
  pressure = 4.0;
  CHECK(h.start(second));
  CHECK_FALSE(h.policy().next_recheck_ns());  // a budget wait needs no timer

  SECTION("with nothing running, pressure does not stop progress") {
    pressure = 50.0;
    h.now += 500 * kMs;
    JobInfo& third = h.submit(3);
    CHECK(h.ask(third) == Admission::kHold);
    h.finish(first, kMiB);
    h.finish(second, kMiB);
    CHECK(h.start(third));
  }
  CHECK(h.policy().pressure().pauses() >= 1);
  CHECK(h.policy().pressure().paused_ns(h.now) >= 1000 * kMs);
}

TEST_CASE("an OOM retry is predicted at least at the peak it was killed at",
          "[memory][admission][oom]") {
  Harness h = make(10 * kGiB, {kGiB});
  JobInfo& victim = h.submit(1);
  REQUIRE(h.start(victim));
  h.finish(victim, 3 * kGiB, /*oom_killed=*/true);
  victim.peak_floor_bytes = bytes(3 * kGiB);  // what the engine sets before rerun_alone
  h.policy().on_submit(victim);
  CHECK(victim.predicted_peak_bytes >= bytes(3 * kGiB));
  CHECK(h.start(victim));  // nothing runs
  CHECK(h.policy().running_predicted_bytes() >= 3 * kGiB);
}

TEST_CASE("unknown commands get the default, then what similar commands took",
          "[memory][admission][learned]") {
  // Cold: no history. Budget 10 GiB: the default is min(1 GiB, budget / 5) = 1 GiB.
  Harness h = make(10 * kGiB, {});
  std::vector<JobInfo*> compiles;
  for (std::uint64_t n = 1; n <= 4; ++n) compiles.push_back(&h.submit(n, /*program=*/1));
  CHECK(compiles[0]->predicted_peak_bytes == bytes(kGiB));
  CHECK(compiles[0]->prediction_learned);
  JobInfo* waiting = compiles[3];
  for (int i = 0; i < 3; ++i) REQUIRE(h.start(*compiles[static_cast<std::size_t>(i)]));
  for (int i = 0; i < 3; ++i) h.finish(*compiles[static_cast<std::size_t>(i)], 100 * kMiB);
  CHECK(waiting->predicted_peak_bytes == bytes(kGiB));
  REQUIRE(h.start(*waiting));  // predicted again when asked: learned by now
  CHECK(waiting->predicted_peak_bytes >= bytes(100 * kMiB));
  CHECK(waiting->predicted_peak_bytes <= bytes(120 * kMiB));

  JobInfo& linker = h.submit(50, /*program=*/2);
  CHECK(linker.prediction_learned);  // from the whole build
  CHECK(linker.predicted_peak_bytes <= bytes(120 * kMiB));
  JobInfo& again = h.submit(1, /*program=*/1);  // command 1 ran in this build
  CHECK_FALSE(again.prediction_learned);
  CHECK(again.predicted_peak_bytes == bytes(100 * kMiB));
}

TEST_CASE("warm history admits more at once than a cold start", "[memory][admission]") {
  // Eight 200 MiB jobs in a 2 GiB budget: all fit when known; unknown, they count as
  // 2 GiB / 5 each, so five start.
  const std::vector<std::uint64_t> peaks(8, 200 * kMiB);
  Harness warm = make(2 * kGiB, peaks);
  Harness cold = make(2 * kGiB, {});
  int warm_started = 0, cold_started = 0;
  for (std::uint64_t n = 1; n <= 8; ++n) {
    warm_started += warm.start(warm.submit(n));
    cold_started += cold.start(cold.submit(n));
  }
  CHECK(warm_started == 8);
  CHECK(cold_started == 5);
}

TEST_CASE("an auto budget is measured again only when nothing runs", "[memory][admission]") {
  std::optional<std::uint64_t> available = 4 * kGiB;
  int reads = 0;
  MemoryBudget setting = MemoryBudget::automatic();
  setting.reserve_bytes = 0;
  Harness::Sources sources;
  sources.auto_budget = std::make_unique<BudgetMeter>(
      setting, nullptr, std::make_unique<test::FakeSystemMemory>(&available, &reads));
  Harness h(std::move(sources));
  CHECK(h.policy().budget_bytes() == 4 * kGiB);
  CHECK(reads == 1);
  JobInfo& a = h.submit(1);
  REQUIRE(h.start(a));  // at the same instant: not measured again
  available = kGiB;  // our own command's memory, mostly
  h.now += 5000 * kMs;
  h.ask(h.submit(2));
  CHECK(reads == 1);  // something runs: the reading would count it twice
  CHECK(h.policy().budget_bytes() == 4 * kGiB);
  h.finish(a, kMiB);
  h.ask(h.submit(3));
  CHECK(reads == 2);
  CHECK(h.policy().budget_bytes() == kGiB);

  SECTION("auto with nothing readable: no budget, the slots alone limit") {
    available.reset();
    Harness::Sources none;
    none.auto_budget = std::make_unique<BudgetMeter>(
        setting, nullptr, std::make_unique<test::FakeSystemMemory>(&available, nullptr));
    Harness unlimited(std::move(none));
    CHECK_FALSE(unlimited.policy().budget_bytes());
    for (std::uint64_t n = 1; n <= 5; ++n) CHECK(unlimited.start(unlimited.submit(n)));
  }
}

TEST_CASE("a budget of 0 runs one command at a time", "[memory][admission]") {
  Harness h = make(std::uint64_t(1), {});  // the reserve took nearly everything
  CHECK(h.start(h.submit(1)));
  CHECK(h.ask(h.submit(2)) == Admission::kWait);
}

TEST_CASE("make_memory_admission puts history, budget, pressure and policy together",
          "[memory][admission][setup]") {
  test::TempDir dir;
  const std::string path = dir / "history.sqlite";
  {
    HistoryOpenResult opened = HistoryDatabase::open(path, {});
    REQUIRE(opened.database);
    std::string problem;
    REQUIRE(opened.database->write({{42, 0, 300 * 1048576, 5, 1}}, problem) == HistoryStatus::kOk);
  }
  test::Warnings warnings;
  MemoryAdmissionConfig config;
  config.budget = *MemoryBudget::parse("1G");
  config.history_path = path;
  config.warn = warnings.sink();
  MemoryAdmission admission = make_memory_admission(std::move(config), 0);
  REQUIRE(admission.history);
  REQUIRE(admission.policy);
  CHECK(admission.policy->budget_bytes() == kGiB);
  JobInfo job;
  job.key.exact = 42;
  admission.policy->on_submit(job);
  CHECK_FALSE(job.prediction_learned);
  CHECK(job.predicted_peak_bytes == bytes(300 * kMiB));
  admission.history->record(job.key, 310 * 1048576, 5);
  CHECK(admission.history->flush());
  CHECK(warnings.messages().empty());

  SECTION("auto measures this machine; no history path, no store") {
    MemoryAdmissionConfig automatic;
    MemoryAdmission measured = make_memory_admission(std::move(automatic), 0);
    CHECK_FALSE(measured.history);
    REQUIRE(measured.policy->budget_bytes());
    CHECK(*measured.policy->budget_bytes() > 0);
  }
}

}  // namespace
}  // namespace spawnpool::detail
