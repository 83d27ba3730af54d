// The admission policy with fake memory and pressure sources and a simulated scheduler:
// fits or waits, progress with nothing running, passing and the starvation bound,
// pressure with hysteresis, exclusive (OOM retry) jobs, learned estimates, cold and warm
// history, the memory-wait accounting and the auto budget's re-measurement.
#include <algorithm>
#include <catch2/catch.hpp>
#include <list>
#include <optional>
#include <vector>

#include "engine/src/memory/admission_policy.h"
#include "engine/src/memory/admission_policy_setup.h"
#include "engine/src/memory/history_store_database.h"
#include "tests/unit/memory_test_support.h"

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;
constexpr std::uint64_t kGiB = std::uint64_t(1) << 30;
constexpr std::int64_t kMs = 1'000'000;

// What the engine's scheduler does around the policy: a queue in order, a set of
// running jobs, and the calls of the seam (on_queued, pick + on_dispatch, on_finish).
class Scheduler {
 public:
  struct Sources {
    std::optional<std::uint64_t> budget;  // explicit; unset: no budget at all
    HistorySnapshot history;
    const std::optional<double>* pressure = nullptr;
    std::unique_ptr<MemoryBudget> auto_budget;  // overrides `budget`
  };

  Scheduler(AdmissionOptions options, Sources sources) : slots_(options.slots) {
    std::unique_ptr<MemoryBudget> budget = std::move(sources.auto_budget);
    if (!budget && sources.budget) {
      MemoryBudgetSetting setting;
      setting.automatic = false;
      setting.bytes = *sources.budget;
      budget = std::make_unique<MemoryBudget>(setting, nullptr, nullptr);
    }
    std::unique_ptr<PressureSource> pressure;
    if (sources.pressure) pressure = std::make_unique<test::FakePressure>(sources.pressure, nullptr);
    policy_.emplace(options, std::move(budget), std::move(pressure), std::move(sources.history), now);
  }

  AdmissionPolicy& policy() { return *policy_; }

  /// Queues a job of command `exact` (program `program`).
  AdmissionTicket& submit(std::uint64_t exact, std::uint64_t program = 1) {
    AdmissionTicket& ticket = tickets_.emplace_back();
    ticket.key.exact = exact;
    ticket.key.program = program;
    requeue(ticket);
    return ticket;
  }
  void requeue(AdmissionTicket& ticket) {
    policy_->on_queued(ticket, now);
    queue_.push_back(&ticket);
  }

  /// One pick; the job dispatched, or null.
  AdmissionTicket* step() {
    AdmissionQueue view{queue_.size(), [this](std::size_t i) -> AdmissionTicket& { return *queue_[i]; }};
    const std::optional<std::size_t> index = policy_->pick(view, now);
    if (!index) return nullptr;
    AdmissionTicket* ticket = queue_[*index];
    queue_.erase(queue_.begin() + static_cast<std::ptrdiff_t>(*index));
    policy_->on_dispatch(*ticket, now);
    running_.push_back(ticket);
    return ticket;
  }
  /// Picks until the policy says no or the slots are full; the jobs dispatched.
  std::vector<AdmissionTicket*> fill() {
    std::vector<AdmissionTicket*> started;
    while (running_.size() < slots_) {
      AdmissionTicket* ticket = step();
      if (!ticket) break;
      started.push_back(ticket);
    }
    return started;
  }
  void finish(AdmissionTicket& ticket, std::uint64_t peak, bool oom_killed = false) {
    running_.erase(std::find(running_.begin(), running_.end(), &ticket));
    policy_->on_finish(ticket, {peak, 1000, oom_killed}, now);
  }
  void withdraw(AdmissionTicket& ticket) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), &ticket));
    policy_->on_withdrawn(ticket, now);
  }
  std::size_t queued() const { return queue_.size(); }
  std::size_t running() const { return running_.size(); }

  std::int64_t now = 1'000'000 * kMs;

 private:
  std::size_t slots_;
  std::optional<AdmissionPolicy> policy_;
  std::list<AdmissionTicket> tickets_;  // stable addresses, as job records have
  std::vector<AdmissionTicket*> queue_;
  std::vector<AdmissionTicket*> running_;
};

AdmissionOptions options_with(std::size_t slots, std::uint32_t max_passed = 0) {
  AdmissionOptions options;
  options.slots = slots;
  options.max_times_passed = max_passed;
  return options;
}

// A history in which command N (1..count) peaked at peaks[N-1].
HistorySnapshot history_of(const std::vector<std::uint64_t>& peaks) {
  HistorySnapshot history;
  for (std::size_t i = 0; i < peaks.size(); ++i)
    history.add(i + 1, 0, {static_cast<std::int64_t>(peaks[i]), 1});
  return history;
}

Scheduler make(std::size_t slots, std::optional<std::uint64_t> budget,
               const std::vector<std::uint64_t>& peaks, std::uint32_t max_passed = 0,
               const std::optional<double>* pressure = nullptr) {
  Scheduler::Sources sources;
  sources.budget = budget;
  sources.history = history_of(peaks);
  sources.pressure = pressure;
  return Scheduler(options_with(slots, max_passed), std::move(sources));
}

TEST_CASE("a job starts only if the running predictions plus its own fit the budget",
          "[memory][admission]") {
  Scheduler s = make(4, 1000 * kMiB, {400 * kMiB, 400 * kMiB, 400 * kMiB, 200 * kMiB});
  AdmissionTicket& a = s.submit(1);
  AdmissionTicket& b = s.submit(2);
  AdmissionTicket& c = s.submit(3);
  CHECK(a.predicted_peak_bytes == 400 * kMiB);
  CHECK(a.prediction_source == PredictionSource::kExact);
  CHECK(s.fill() == std::vector<AdmissionTicket*>{&a, &b});
  CHECK(s.policy().running_predicted_bytes() == 800 * kMiB);
  CHECK(s.step() == nullptr);  // 1200 > 1000, with a slot free
  s.finish(a, 390 * kMiB);
  CHECK(s.step() == &c);
  AdmissionTicket& d = s.submit(4);
  CHECK(s.step() == &d);  // 800 + 200 = 1000: fits exactly
  CHECK(s.policy().running_predicted_bytes() == 1000 * kMiB);
}

TEST_CASE("with nothing running the oldest job starts, however large", "[memory][admission]") {
  Scheduler s = make(4, 100 * kMiB, {500 * kMiB, 50 * kMiB});
  AdmissionTicket& huge = s.submit(1);
  AdmissionTicket& small = s.submit(2);
  CHECK(s.step() == &huge);
  CHECK(s.step() == nullptr);  // 500 + 50 > 100
  s.finish(huge, 480 * kMiB);
  CHECK(s.step() == &small);
}

TEST_CASE("a job that fits passes one that does not, until the starvation bound",
          "[memory][admission]") {
  // Budget 1000; A (600) runs; Big (500) waits; small jobs (100) pass it twice (N = 2).
  Scheduler s = make(8, 1000 * kMiB, {600 * kMiB, 500 * kMiB, 100 * kMiB, 100 * kMiB, 100 * kMiB},
                     /*max_passed=*/2);
  AdmissionTicket& a = s.submit(1);
  REQUIRE(s.step() == &a);
  AdmissionTicket& big = s.submit(2);
  AdmissionTicket& s1 = s.submit(3);
  AdmissionTicket& s2 = s.submit(4);
  AdmissionTicket& s3 = s.submit(5);
  // In queue order; then s3 would fit (800 + 100), but Big has been passed twice.
  CHECK(s.fill() == std::vector<AdmissionTicket*>{&s1, &s2});
  CHECK(big.times_passed == 2);
  CHECK(s.policy().stats(s.now).starvation_blocks == 1);
  CHECK(s.step() == nullptr);  // and so on, until Big fits or nothing runs
  CHECK(s.policy().stats(s.now).starvation_blocks == 2);
  CHECK(s.policy().stats(s.now).passes == 2);
  s.finish(a, 600 * kMiB);
  CHECK(s.step() == &big);  // 200 + 500 fits now
  CHECK(s.step() == &s3);
  CHECK(s3.times_passed == 0);
}

TEST_CASE("the default starvation bound is max(4, 2 x slots)", "[memory][admission]") {
  CHECK(make(1, kGiB, {}).policy().max_times_passed() == 4);
  CHECK(make(8, kGiB, {}).policy().max_times_passed() == 16);
}

TEST_CASE("memory pressure holds admissions back, with hysteresis, at a bounded rate",
          "[memory][admission][pressure]") {
  std::optional<double> pressure = 0.0;
  Scheduler s = make(4, std::nullopt, {}, 0, &pressure);  // no budget: pressure alone
  AdmissionTicket& first = s.submit(1);
  REQUIRE(s.step() == &first);
  pressure = 30.0;
  AdmissionTicket& second = s.submit(2);
  CHECK(s.step() == nullptr);
  const std::optional<std::int64_t> recheck = s.policy().next_recheck_ns();
  REQUIRE(recheck);
  CHECK(*recheck == s.now + 500 * kMs);

  pressure = 0.0;
  s.now += 100 * kMs;
  CHECK(s.step() == nullptr);  // no new reading before the poll interval
  s.now = *recheck;
  pressure = 7.0;
  CHECK(s.step() == nullptr);  // below 10% but not below 5%
  s.now += 500 * kMs;
  pressure = 4.0;
  CHECK(s.step() == &second);
  CHECK_FALSE(s.policy().next_recheck_ns());
  CHECK(second.memory_wait_ns == 1000 * kMs);  // held from the first refusal to now

  SECTION("with nothing running, pressure does not stop progress") {
    pressure = 50.0;
    s.now += 500 * kMs;
    AdmissionTicket& third = s.submit(3);
    CHECK(s.step() == nullptr);
    s.finish(first, kMiB);
    s.finish(second, kMiB);
    CHECK(s.step() == &third);
  }
  const AdmissionStats stats = s.policy().stats(s.now);
  CHECK(stats.pressure_pauses >= 1);
  CHECK(stats.pressure_paused_ns >= 1000 * kMs);
}

TEST_CASE("an exclusive job (OOM retry) runs alone", "[memory][admission][oom]") {
  Scheduler s = make(4, 10 * kGiB, {kGiB, 100 * kMiB, 100 * kMiB, 100 * kMiB});
  AdmissionTicket& victim = s.submit(1);
  AdmissionTicket& other = s.submit(2);
  REQUIRE(s.fill().size() == 2);
  s.finish(victim, 3 * kGiB, /*oom_killed=*/true);
  AdmissionPolicy::mark_oom_retry(victim, 3 * kGiB);
  s.requeue(victim);
  CHECK(victim.exclusive);
  CHECK(victim.predicted_peak_bytes >= 3 * kGiB);  // at least the peak it was killed at
  AdmissionTicket& later = s.submit(3);
  CHECK(s.step() == nullptr);  // waits for `other` to end; nothing passes it meanwhile
  s.finish(other, 100 * kMiB);
  CHECK(s.step() == &victim);
  CHECK(s.step() == nullptr);  // alone while it runs, though `later` fits
  CHECK(later.times_passed == 0);
  s.finish(victim, 3 * kGiB);
  CHECK(s.step() == &later);
  const AdmissionStats stats = s.policy().stats(s.now);
  CHECK(stats.exclusive_runs == 1);
  CHECK(stats.oom_kills == 1);

  SECTION("an exclusive job behind others goes first once nothing runs, passing nobody") {
    s.finish(later, 100 * kMiB);
    AdmissionTicket& normal = s.submit(4);
    AdmissionTicket& retry = s.submit(2);
    AdmissionPolicy::mark_oom_retry(retry, 0);
    CHECK(s.step() == &retry);
    CHECK(normal.times_passed == 0);
  }
}

TEST_CASE("unknown commands get the default, then what similar commands took",
          "[memory][admission][learned]") {
  // Cold: no history. Budget 10 GiB: the default is min(1 GiB, budget / 5) = 1 GiB.
  Scheduler s = make(8, 10 * kGiB, {});
  std::vector<AdmissionTicket*> compiles;
  for (std::uint64_t n = 1; n <= 4; ++n) compiles.push_back(&s.submit(n, /*program=*/1));
  CHECK(compiles[0]->predicted_peak_bytes == kGiB);
  CHECK(compiles[0]->prediction_source == PredictionSource::kDefault);
  AdmissionTicket* waiting = compiles[3];
  for (int i = 0; i < 3; ++i) REQUIRE(s.step() == compiles[static_cast<std::size_t>(i)]);
  for (int i = 0; i < 3; ++i) s.finish(*compiles[static_cast<std::size_t>(i)], 100 * kMiB);
  CHECK(waiting->prediction_source == PredictionSource::kDefault);
  REQUIRE(s.step() == waiting);  // predicted again at the pick: learned by now
  CHECK(waiting->prediction_source == PredictionSource::kProgram);
  CHECK(waiting->predicted_peak_bytes >= 100 * kMiB);
  CHECK(waiting->predicted_peak_bytes <= 120 * kMiB);

  AdmissionTicket& linker = s.submit(50, /*program=*/2);
  CHECK(linker.prediction_source == PredictionSource::kBuild);
  AdmissionTicket& again = s.submit(1, /*program=*/1);  // command 1 ran in this build
  CHECK(again.prediction_source == PredictionSource::kExact);
  CHECK(again.predicted_peak_bytes == 100 * kMiB);
  CHECK(s.policy().stats(s.now).predictions[static_cast<int>(PredictionSource::kDefault)] == 3);
}

TEST_CASE("warm history admits more at once than a cold start", "[memory][admission]") {
  // Eight 200 MiB jobs in a 2 GiB budget: all fit when known; unknown, they count as
  // 2 GiB / 5 each, so five start.
  const std::vector<std::uint64_t> peaks(8, 200 * kMiB);
  Scheduler warm = make(8, 2 * kGiB, peaks);
  Scheduler cold = make(8, 2 * kGiB, {});
  for (std::uint64_t n = 1; n <= 8; ++n) {
    warm.submit(n);
    cold.submit(n);
  }
  CHECK(warm.fill().size() == 8);
  CHECK(cold.fill().size() == 5);
}

TEST_CASE("memory wait counts only while a slot is free", "[memory][admission][stats]") {
  Scheduler s = make(2, 1000 * kMiB, {800 * kMiB, 800 * kMiB, 100 * kMiB, 100 * kMiB});
  AdmissionTicket& a = s.submit(1);
  AdmissionTicket& b = s.submit(2);
  REQUIRE(s.step() == &a);
  CHECK(s.step() == nullptr);  // b does not fit: held for memory
  s.now += 300 * kMs;
  s.finish(a, 800 * kMiB);
  REQUIRE(s.step() == &b);
  CHECK(b.memory_wait_ns == 300 * kMs);

  AdmissionTicket& c = s.submit(3);
  REQUIRE(s.step() == &c);  // both slots busy now
  AdmissionTicket& d = s.submit(4);
  s.now += 500 * kMs;  // d waits for a slot, not for memory
  s.finish(c, 100 * kMiB);
  REQUIRE(s.step() == &d);
  CHECK(d.memory_wait_ns == 0);
  const AdmissionStats stats = s.policy().stats(s.now);
  CHECK(stats.admitted == 4);
  CHECK(stats.delayed == 1);
  CHECK(stats.memory_wait_ns == 300 * kMs);
}

TEST_CASE("a held job that leaves the queue ends the hold", "[memory][admission][stats]") {
  Scheduler s = make(2, 1000 * kMiB, {800 * kMiB, 800 * kMiB, 100 * kMiB});
  AdmissionTicket& a = s.submit(1);
  AdmissionTicket& b = s.submit(2);
  REQUIRE(s.step() == &a);
  CHECK(s.step() == nullptr);
  s.now += 100 * kMs;
  s.withdraw(b);  // cancelled while waiting
  s.now += 900 * kMs;
  AdmissionTicket& c = s.submit(3);
  REQUIRE(s.step() == &c);
  CHECK(c.memory_wait_ns == 0);  // the pool was not holding anything back meanwhile
  s.requeue(b);  // a withdrawn ticket may join again
  CHECK(s.queued() == 1);
}

TEST_CASE("an auto budget is measured again only when nothing runs", "[memory][admission]") {
  std::optional<std::uint64_t> available = 4 * kGiB;
  int reads = 0;
  MemoryBudgetSetting setting;
  setting.reserve_bytes = 0;
  Scheduler::Sources sources;
  sources.auto_budget = std::make_unique<MemoryBudget>(
      setting, nullptr, std::make_unique<test::FakeSystemMemory>(&available, &reads));
  Scheduler s(options_with(4), std::move(sources));
  CHECK(s.policy().budget_bytes() == 4 * kGiB);
  CHECK(reads == 1);
  AdmissionTicket& a = s.submit(1);
  REQUIRE(s.step() == &a);  // at the same instant: not measured again
  available = kGiB;  // our own command's memory, mostly
  s.now += 5000 * kMs;
  s.submit(2);
  s.step();
  CHECK(reads == 1);  // something runs: the reading would count it twice
  CHECK(s.policy().budget_bytes() == 4 * kGiB);

  SECTION("auto with nothing readable: no budget, slots alone limit") {
    available.reset();
    Scheduler::Sources none;
    none.auto_budget = std::make_unique<MemoryBudget>(
        setting, nullptr, std::make_unique<test::FakeSystemMemory>(&available, nullptr));
    Scheduler unlimited(options_with(3), std::move(none));
    CHECK_FALSE(unlimited.policy().budget_bytes());
    for (std::uint64_t n = 1; n <= 5; ++n) unlimited.submit(n);
    CHECK(unlimited.fill().size() == 3);
  }
}

TEST_CASE("a budget of 0 runs one command at a time", "[memory][admission]") {
  Scheduler s = make(4, std::uint64_t(1), {});  // the reserve took nearly everything
  for (std::uint64_t n = 1; n <= 3; ++n) s.submit(n);
  CHECK(s.fill().size() == 1);
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
  config.budget = *MemoryBudgetSetting::parse("1G");
  config.history_path = path;
  config.options.slots = 2;
  config.warn = warnings.sink();
  MemoryAdmission admission = make_memory_admission(std::move(config), 0);
  REQUIRE(admission.history);
  REQUIRE(admission.policy);
  CHECK(admission.policy->budget_bytes() == kGiB);
  AdmissionTicket ticket;
  ticket.key.exact = 42;
  admission.policy->on_queued(ticket, 0);
  CHECK(ticket.prediction_source == PredictionSource::kExact);
  CHECK(ticket.predicted_peak_bytes == 300 * kMiB);
  admission.history->record(ticket.key, 310 * 1048576, 5);
  CHECK(admission.history->flush());
  CHECK(warnings.messages().empty());

  SECTION("auto measures this machine; no history path, no store") {
    MemoryAdmissionConfig automatic;
    automatic.options.slots = 2;
    MemoryAdmission measured = make_memory_admission(std::move(automatic), 0);
    CHECK_FALSE(measured.history);
    REQUIRE(measured.policy->budget_bytes());
    CHECK(*measured.policy->budget_bytes() > 0);
  }
}

}  // namespace
}  // namespace spawnpool::detail
