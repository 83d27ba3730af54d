// The memory budget: MemAvailable from meminfo text, sizes as users write them, and
// `auto` as min(cgroup limit - usage, MemAvailable) - reserve, with fake sources.
#include <catch2/catch.hpp>
#include <fstream>
#include <optional>
#include <string>

#include "engine/src/admission/budget_meter.h"
#include "tests/unit/support/memory_test_support.h"

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;
constexpr std::uint64_t kGiB = std::uint64_t(1) << 30;

constexpr const char* kMeminfo =
    "MemTotal:       24576000 kB\n"
    "MemFree:         1000000 kB\n"
    "MemAvailable:   12345678 kB\n"
    "Buffers:           12345 kB\n";

TEST_CASE("MemAvailable is read from meminfo text", "[memory][budget]") {
  CHECK(parse_mem_available(kMeminfo) == std::uint64_t(12345678) * 1024);
  CHECK_FALSE(parse_mem_available("MemTotal: 100 kB\nMemFree: 5 kB\n"));
  CHECK_FALSE(parse_mem_available("MemAvailable: lots\n"));
  CHECK_FALSE(parse_mem_available("MemAvailable: 100 MB\n"));
  CHECK_FALSE(parse_mem_available("XMemAvailable: 100 kB\n"));  // not at a line start
  CHECK_FALSE(parse_mem_available("MemAvailable: 99999999999999999999999 kB\n"));
  CHECK(parse_mem_available("Other: 1 kB\nMemAvailable:       7 kB") == 7 * 1024);
}

TEST_CASE("ProcMeminfo reads the file each time", "[memory][budget]") {
  test::TempDir dir;
  const std::string path = dir / "meminfo";
  std::ofstream(path) << kMeminfo;
  ProcMeminfo meminfo(path);
  CHECK(meminfo.available_bytes() == std::uint64_t(12345678) * 1024);
  std::ofstream(path, std::ios::trunc) << "MemAvailable: 42 kB\n";
  CHECK(meminfo.available_bytes() == 42 * 1024);
  CHECK_FALSE(ProcMeminfo(dir / "missing").available_bytes());
  const std::optional<std::uint64_t> real = ProcMeminfo().available_bytes();
  REQUIRE(real);
  CHECK(*real > 0);
}

TEST_CASE("sizes are read as users write them", "[memory][budget]") {
  using Case = std::pair<const char*, std::optional<std::uint64_t>>;
  const Case c = GENERATE(values<Case>({
      {"123", 123},
      {"4G", 4 * kGiB},
      {"4g", 4 * kGiB},
      {"4GiB", 4 * kGiB},
      {"4 GB", 4 * kGiB},
      {"1.5G", 3 * kGiB / 2},
      {"512M", 512 * kMiB},
      {"2k", 2048},
      {"1T", 1024 * kGiB},
      {" 7 ", 7},
      {"0.5K", 512},
      {"", std::nullopt},
      {"G", std::nullopt},
      {"abc", std::nullopt},
      {"-1", std::nullopt},
      {"1.5X", std::nullopt},
      {"1Gx", std::nullopt},
      {"99999999999999999999", std::nullopt},
      {"17179869184G", std::nullopt},  // 2^64 bytes
  }));
  CAPTURE(c.first);
  CHECK(parse_memory_size(c.first) == c.second);
}

TEST_CASE("a budget setting is off, auto or a size", "[memory][budget]") {
  using Mode = MemoryBudget::Mode;
  CHECK(MemoryBudget::parse("auto")->mode == Mode::kAuto);
  CHECK(MemoryBudget::parse(" AUTO ")->mode == Mode::kAuto);
  CHECK(MemoryBudget::parse("off")->mode == Mode::kOff);
  CHECK_FALSE(MemoryBudget::parse("Off")->enabled());
  const std::optional<MemoryBudget> explicit_size = MemoryBudget::parse("6G");
  REQUIRE(explicit_size);
  CHECK(explicit_size->mode == Mode::kBytes);
  CHECK(explicit_size->bytes == 6 * kGiB);
  CHECK(explicit_size->to_string() == std::to_string(6 * kGiB));
  CHECK(MemoryBudget::parse(explicit_size->to_string())->bytes == 6 * kGiB);
  CHECK(MemoryBudget::automatic().to_string() == "auto");
  CHECK(MemoryBudget().to_string() == "off");
  CHECK_FALSE(MemoryBudget::parse("0"));
  CHECK_FALSE(MemoryBudget::parse("lots"));
}

TEST_CASE("auto is min(cgroup limit - usage, MemAvailable) minus a reserve", "[memory][budget]") {
  CgroupMemorySource::Reading cgroup{8 * kGiB, 2 * kGiB};
  std::optional<std::uint64_t> available = 10 * kGiB;
  MemoryBudget setting = MemoryBudget::automatic();
  setting.reserve_bytes = 0;
  const auto budget_now = [&](const MemoryBudget& s) {
    return BudgetMeter(s, std::make_unique<test::FakeCgroup>(&cgroup),
                       std::make_unique<test::FakeSystemMemory>(&available, nullptr))
        .measure();
  };
  CHECK(budget_now(setting) == 6 * kGiB);  // the cgroup binds
  available = 3 * kGiB;
  CHECK(budget_now(setting) == 3 * kGiB);  // the machine binds
  cgroup.limit_bytes.reset();
  CHECK(budget_now(setting) == 3 * kGiB);  // no cgroup limit
  cgroup.limit_bytes = std::uint64_t(9223372036854771712ULL);  // v1's "no limit"
  CHECK(budget_now(setting) == 3 * kGiB);
  cgroup = {2 * kGiB, 3 * kGiB};  // over its limit already
  CHECK(budget_now(setting) == 0);
  cgroup = {4 * kGiB, std::nullopt};  // usage unknown: the cgroup cannot say
  CHECK(budget_now(setting) == 3 * kGiB);
  available.reset();
  CHECK_FALSE(budget_now(setting));  // nothing answers: no budget

  SECTION("the reserve") {
    cgroup = {8 * kGiB, 2 * kGiB};
    setting.reserve_bytes = kGiB;
    CHECK(budget_now(setting) == 5 * kGiB);
    setting.reserve_bytes = 7 * kGiB;
    CHECK(budget_now(setting) == 0);
    setting.reserve_bytes.reset();  // default: a tenth
    CHECK(budget_now(setting) == 6 * kGiB - BudgetMeter::default_reserve(6 * kGiB));
    CHECK(BudgetMeter::default_reserve(6 * kGiB) == 6 * kGiB / 10);
    CHECK(BudgetMeter::default_reserve(100 * kMiB) == 64 * kMiB);
    CHECK(BudgetMeter::default_reserve(100 * kGiB) == kGiB);
  }
  SECTION("an explicit size ignores the sources and takes no reserve") {
    const MemoryBudget fixed = *MemoryBudget::parse("1G");
    CHECK(budget_now(fixed) == kGiB);
    CHECK(BudgetMeter(fixed, nullptr, nullptr).measure() == kGiB);
  }
  SECTION("without sources, auto has no budget") {
    CHECK_FALSE(BudgetMeter(MemoryBudget::automatic(), nullptr, nullptr).measure());
  }
}

}  // namespace
}  // namespace spawnpool::detail
