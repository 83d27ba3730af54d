// The OOM-kill counter a pool without slot cgroups reads, on fixture files as the kernel
// writes them (v2 memory.events, v1 memory.oom_control, /proc/vmstat), and the choice of
// file for a hierarchy; then this machine's real counter, where there is one.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "tests/unit/support/test_support.h"
#include "worker_pool/cgroup/cgroup_oom_count.h"

namespace spawnpool::detail {
namespace {

using test::TempDir;

void write_file(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// /proc/vmstat as 6.x writes it, padded past 4 KiB so that the counter sits beyond the
// first page (machines with many zones or NUMA nodes have longer files).
std::string vmstat_text(std::int64_t oom_kills) {
  std::string text = "nr_free_pages 5537213\nnr_zone_inactive_anon 0\n";
  for (int i = 0; i < 200; ++i) text += "numa_counter_" + std::to_string(i) + " 12345\n";
  text += "pgfault 81283641\noom_kill " + std::to_string(oom_kills) + "\nnr_unstable 0\n";
  return text;
}

TEST_CASE("the oom_kill count of each kind of file", "[cgroup][oom_count]") {
  TempDir dir;
  OomKillCount count;
  std::int64_t value = -1;

  SECTION("v2 memory.events: the oom_kill line, not oom or oom_group_kill") {
    write_file(dir / "memory.events",
               "low 0\nhigh 0\nmax 40\noom 7\noom_kill 3\noom_group_kill 1\n");
    REQUIRE(count.open_file(dir / "memory.events", OomCountSource::kCgroupV2));
    REQUIRE(count.read(value));
    CHECK(value == 3);
  }
  SECTION("v1 memory.oom_control: oom_kill after oom_kill_disable") {
    write_file(dir / "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 11\n");
    REQUIRE(count.open_file(dir / "memory.oom_control", OomCountSource::kCgroupV1));
    REQUIRE(count.read(value));
    CHECK(value == 11);
  }
  SECTION("/proc/vmstat, its counter beyond the first 4 KiB") {
    const std::string text = vmstat_text(9);
    REQUIRE(text.find("oom_kill") > 4096);
    write_file(dir / "vmstat", text);
    REQUIRE(count.open_file(dir / "vmstat", OomCountSource::kMachine));
    REQUIRE(count.read(value));
    CHECK(value == 9);
  }
  CHECK(count.is_open());
}

TEST_CASE("the counter is read again at each read (one file opened once)", "[cgroup][oom_count]") {
  TempDir dir;
  const std::string events = dir / "memory.events";
  write_file(events, "oom 0\noom_kill 0\n");
  OomKillCount count;
  REQUIRE(count.open_file(events, OomCountSource::kCgroupV2));
  std::int64_t before = -1, after = -1;
  REQUIRE(count.read(before));
  // The kernel rewrites the file's content in place; so does this (same inode).
  std::ofstream(events, std::ios::binary | std::ios::in) << "oom 2\noom_kill 2\n";
  REQUIRE(count.read(after));
  CHECK(before == 0);
  CHECK(after == 2);
}

TEST_CASE("a file without the counter, or none, is not opened", "[cgroup][oom_count]") {
  TempDir dir;
  OomKillCount count;
  write_file(dir / "memory.events", "low 0\nhigh 0\nmax 0\noom 0\n");  // before 4.13
  CHECK_FALSE(count.open_file(dir / "memory.events", OomCountSource::kCgroupV2));
  CHECK_FALSE(count.open_file(dir / "missing", OomCountSource::kCgroupV1));
  CHECK_FALSE(count.is_open());
  CHECK(count.source() == OomCountSource::kNone);
  std::int64_t value = 0;
  CHECK_FALSE(count.read(value));
}

TEST_CASE("the driver's cgroup's file is preferred, the machine's counter is the fallback",
          "[cgroup][oom_count]") {
  TempDir dir;
  write_file(dir / "vmstat", vmstat_text(4));
  CgroupHierarchy hierarchy;
  hierarchy.dir = dir.path();
  OomKillCount count;
  std::int64_t value = -1;

  SECTION("v2 with memory.events") {
    write_file(dir / "memory.events", "oom 1\noom_kill 1\n");
    hierarchy.version = CgroupVersion::kV2;
    REQUIRE(count.open(hierarchy, (dir / "vmstat").c_str()));
    CHECK(count.source() == OomCountSource::kCgroupV2);
    CHECK(count.path() == dir / "memory.events");
    REQUIRE(count.read(value));
    CHECK(value == 1);
  }
  SECTION("v1 with memory.oom_control") {
    write_file(dir / "memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 6\n");
    hierarchy.version = CgroupVersion::kV1;
    REQUIRE(count.open(hierarchy, (dir / "vmstat").c_str()));
    CHECK(count.source() == OomCountSource::kCgroupV1);
    REQUIRE(count.read(value));
    CHECK(value == 6);
  }
  SECTION("the v2 root cgroup (no memory.events): the machine's") {
    hierarchy.version = CgroupVersion::kV2;
    REQUIRE(count.open(hierarchy, (dir / "vmstat").c_str()));
    CHECK(count.source() == OomCountSource::kMachine);
    REQUIRE(count.read(value));
    CHECK(value == 4);
  }
  SECTION("no memory cgroup at all: the machine's") {
    hierarchy.version = CgroupVersion::kNone;
    REQUIRE(count.open(hierarchy, (dir / "vmstat").c_str()));
    CHECK(count.source() == OomCountSource::kMachine);
  }
  SECTION("nothing readable") {
    hierarchy.version = CgroupVersion::kV1;
    CHECK_FALSE(count.open(hierarchy, (dir / "no-vmstat").c_str()));
  }
}

// Every kernel this project runs on has /proc/vmstat's oom_kill (4.13+) at least.
TEST_CASE("this process's counter is readable here", "[cgroup][oom_count]") {
  OomKillCount count;
  REQUIRE(count.open(find_memory_hierarchy()));
  INFO("counter " << count.path());
  std::int64_t value = -1;
  REQUIRE(count.read(value));
  CHECK(value >= 0);
}

}  // namespace
}  // namespace spawnpool::detail
