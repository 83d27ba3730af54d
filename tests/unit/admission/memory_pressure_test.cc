// Memory pressure: `some avg10` from PSI text and files, and the gate that pauses
// admissions above one threshold and resumes below another, reading at a bounded rate.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "engine/src/admission/memory_pressure.h"
#include "tests/unit/support/memory_test_support.h"

namespace spawnpool::detail {
namespace {

constexpr std::int64_t kMs = 1'000'000;

TEST_CASE("some avg10 is read from PSI text", "[memory][pressure]") {
  CHECK(parse_psi_some_avg10("some avg10=12.34 avg60=1.00 avg300=0.00 total=123\n"
                             "full avg10=5.00 avg60=0.00 avg300=0.00 total=45\n") == Approx(12.34));
  CHECK(parse_psi_some_avg10("full avg10=5.00 avg60=0.00 avg300=0.00 total=45\n"
                             "some avg10=0.00 avg60=0.00 avg300=0.00 total=0") == Approx(0.0));
  CHECK_FALSE(parse_psi_some_avg10("full avg10=5.00 avg60=0.00 avg300=0.00 total=45\n"));
  CHECK_FALSE(parse_psi_some_avg10("some avg10=abc avg60=0.00\n"));
  CHECK_FALSE(parse_psi_some_avg10("some avg60=1.00\n"));
  CHECK_FALSE(parse_psi_some_avg10(""));
}

TEST_CASE("a PSI file is read again through the descriptor it keeps", "[memory][pressure]") {
  test::TempDir dir;
  const std::string path = dir / "memory.pressure";
  std::ofstream(path) << "some avg10=1.50 avg60=0.00 avg300=0.00 total=1\n";
  PsiFile file(path);
  CHECK(file.some_avg10() == Approx(1.5));
  std::ofstream(path, std::ios::trunc) << "some avg10=22.00 avg60=0.00 avg300=0.00 total=9\n";
  CHECK(file.some_avg10() == Approx(22.0));
  CHECK_FALSE(PsiFile(dir / "missing").some_avg10());

  SECTION("the cgroup's file when it reads, else the system's") {
    const std::unique_ptr<PsiFile> cgroup = open_memory_pressure(path);
    REQUIRE(cgroup);
    CHECK(cgroup->path() == path);
    const std::unique_ptr<PsiFile> system = open_memory_pressure(dir / "no-such-cgroup/memory.pressure");
    if (std::filesystem::exists("/proc/pressure/memory")) {
      REQUIRE(system);
      CHECK(system->path() == "/proc/pressure/memory");
      CHECK(*system->some_avg10() >= 0.0);
    } else {
      CHECK_FALSE(system);
    }
  }
}

TEST_CASE("the gate pauses above 10%, resumes below 5%, and reads at most every 500 ms",
          "[memory][pressure]") {
  std::optional<double> avg10 = 0.0;
  int reads = 0;
  PressureGate gate(std::make_unique<test::FakePressure>(&avg10, &reads), PressureThresholds{});
  std::int64_t now = 1000 * kMs;
  const auto paused_after = [&](double value) {
    avg10 = value;
    now += 500 * kMs;
    return gate.paused(now);
  };
  CHECK_FALSE(gate.paused(now));
  CHECK(reads == 1);
  CHECK(gate.next_poll_ns() == now + 500 * kMs);

  CHECK_FALSE(paused_after(10.0));  // at the threshold is not above it
  CHECK(paused_after(10.5));
  CHECK(gate.pauses() == 1);
  const std::int64_t paused_at = now;
  CHECK(paused_after(7.0));  // between the thresholds: stays paused
  CHECK(paused_after(5.0));
  CHECK_FALSE(paused_after(4.9));
  CHECK(gate.paused_ns(now) == now - paused_at);
  CHECK_FALSE(paused_after(7.0));  // between the thresholds: stays open
  CHECK(paused_after(50.0));
  CHECK(gate.pauses() == 2);

  SECTION("between polls the last answer stands, without a reading") {
    const int before = reads;
    avg10 = 0.0;
    CHECK(gate.paused(now + 499 * kMs));
    CHECK(reads == before);
    CHECK_FALSE(gate.paused(now + 500 * kMs));
    CHECK(reads == before + 1);
  }
  SECTION("an unreadable source opens the gate") {
    avg10.reset();
    now += 500 * kMs;
    CHECK_FALSE(gate.paused(now));
    CHECK_FALSE(gate.last_avg10());
  }
}

TEST_CASE("without a source the gate is always open", "[memory][pressure]") {
  PressureGate gate(nullptr, PressureThresholds{});
  CHECK_FALSE(gate.paused(0));
  CHECK_FALSE(gate.next_poll_ns());
  CHECK(gate.pauses() == 0);
}

}  // namespace
}  // namespace spawnpool::detail
