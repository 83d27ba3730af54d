// Measurements, not tests (hidden: run with `spawnpool_cgroup_tests "[.measure]" -s`):
// what the spawner-side calls cost per command, and how close the peak comes to what a
// command allocated. Prints medians; asserts nothing about time (the machine is shared).
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <functional>
#include <vector>

#include "tests/unit/support/cgroup_test_support.h"
#include "tests/unit/support/test_support.h"
#include "worker_pool/cgroup/cgroup_join.h"
#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

std::int64_t median(std::vector<std::int64_t> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0 : values[values.size() / 2];
}

// Runs `body` with slot-0 of a fresh test cgroup open; skips with the reason where none.
void with_open_slot(bool unified,
                    const std::function<void(const test::TestCgroup&, SlotCgroup&)>& body) {
  std::string why;
  const auto pool = unified ? test::TestCgroup::in_unified_hierarchy(why)
                            : test::TestCgroup::in_memory_hierarchy(why);
  TEST_SKIP_UNLESS(pool, why);
  SlotCgroupConfig config;
  config.version = pool->version();
  config.pool_dir = pool->dir();
  SlotCgroup slot;
  REQUIRE(!pool->make_child(slot_dir_name(0)).empty());
  REQUIRE(slot.open(config, why));
  body(*pool, slot);
}

// vfork, as the spawner's clone(CLONE_VM | CLONE_VFORK): the child writes the time its
// join took into our memory, then executes /bin/true. Returns the whole spawn + reap.
std::int64_t spawn_true(int procs_fd, std::int64_t* join_ns) {
  static char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
  const std::int64_t begin = monotonic_ns();
  const pid_t pid = vfork();
  if (pid == 0) {
    if (procs_fd >= 0) {
      const std::int64_t before = monotonic_ns();
      join_cgroup_from_child(procs_fd);
      *join_ns = monotonic_ns() - before;
    }
    execv(argv[0], argv);
    _exit(127);
  }
  int status;
  struct rusage usage;
  wait4(pid, &status, 0, &usage);
  return monotonic_ns() - begin;
}

TEST_CASE("cost of the spawner-side calls per command", "[.measure]") {
  with_open_slot(false, [](const test::TestCgroup& pool, SlotCgroup& slot) {
    std::vector<std::int64_t> begin_ns, end_ns;
    for (int i = 0; i < 20000; ++i) {
      const std::int64_t t0 = monotonic_ns();
      slot.begin_command();
      const std::int64_t t1 = monotonic_ns();
      slot.end_command(true);
      const std::int64_t t2 = monotonic_ns();
      begin_ns.push_back(t1 - t0);
      end_ns.push_back(t2 - t1);
    }
    // Spawns of /bin/true: plain, joining only, and with every per-command call, in
    // alternating batches (the machine is shared: medians of interleaved runs).
    std::vector<std::int64_t> plain, joined, with_cgroup, join_ns, begin_in_loop, end_in_loop;
    for (int round = 0; round < 20; ++round) {
      for (int i = 0; i < 200; ++i) plain.push_back(spawn_true(-1, nullptr));
      std::int64_t join = 0;
      for (int i = 0; i < 200; ++i) joined.push_back(spawn_true(slot.procs_fd(), &join));
      for (int i = 0; i < 200; ++i) {
        const std::int64_t t0 = monotonic_ns();
        slot.begin_command();
        const std::int64_t t1 = monotonic_ns();
        spawn_true(slot.procs_fd(), &join);
        const std::int64_t t2 = monotonic_ns();
        slot.end_command(true);
        const std::int64_t t3 = monotonic_ns();
        with_cgroup.push_back(t3 - t0);
        begin_in_loop.push_back(t1 - t0);
        end_in_loop.push_back(t3 - t2);
        join_ns.push_back(join);
      }
    }
    const double base = static_cast<double>(median(plain));
    std::printf("%s: begin_command %lld ns, end_command %lld ns, join in the child %lld ns "
                "(medians)\n/bin/true spawn+reap (median of 4000 each): plain %.1f us, joining "
                "%.1f us (%.3fx), with every call %.1f us (%.3fx); there, begin_command %lld ns, "
                "end_command %lld ns\n",
                pool.version() == CgroupVersion::kV1 ? "v1" : "v2",
                static_cast<long long>(median(begin_ns)), static_cast<long long>(median(end_ns)),
                static_cast<long long>(median(join_ns)), base / 1000,
                static_cast<double>(median(joined)) / 1000,
                static_cast<double>(median(joined)) / base,
                static_cast<double>(median(with_cgroup)) / 1000,
                static_cast<double>(median(with_cgroup)) / base,
                static_cast<long long>(median(begin_in_loop)),
                static_cast<long long>(median(end_in_loop)));
  });
}

TEST_CASE("cost of joining a v2 cgroup (unified hierarchy)", "[.measure]") {
  with_open_slot(true, [](const test::TestCgroup&, SlotCgroup& slot) {
    std::vector<std::int64_t> join_ns;
    for (int i = 0; i < 2000; ++i) {
      std::int64_t join = 0;
      spawn_true(slot.procs_fd(), &join);
      join_ns.push_back(join);
    }
    std::printf("v2: join in the child %lld ns (median of 2000)\n",
                static_cast<long long>(median(join_ns)));
  });
}

// /bin/true started by the spawner's start_child() and reaped, per command: in a fresh
// cgroup of its own (mkdir, clone3 CLONE_INTO_CGROUP, rmdir: SlotCgroup per command), in
// the slot's cgroup (the child's write to cgroup.procs), and in none; interleaved
// batches, medians. On the unified hierarchy of this process (v2; with or without the
// memory controller, as the output says).
TEST_CASE("cost of a cgroup per command against the slot's and none (v2)", "[.measure]") {
  test::with_test_cgroup(true, [](const test::TestCgroup& pool) {
    SlotCgroupConfig config;
    config.version = pool.version();
    config.pool_dir = pool.dir();
    REQUIRE(!pool.make_child(slot_dir_name(0)).empty());
    REQUIRE(!pool.make_child(slot_dir_name(1)).empty());
    SlotCgroup per_command, slot;
    std::string why;
    REQUIRE(per_command.open(config, why));
    config.slot = 1;
    SlotCgroupOpenOptions slot_only;
    slot_only.per_command = false;
    REQUIRE(slot.open(config, why, slot_only));
    TEST_SKIP_UNLESS(per_command.per_command(), "no cgroup per command here");
    SlotCgroup none;
    auto once = [](SlotCgroup& s) {
      const std::int64_t t0 = monotonic_ns();
      s.begin_command();
      const auto started = test::start_in(s, {"/bin/true"});
      test::reap(started.pid);
      s.end_command(started.join_error == 0);
      return monotonic_ns() - t0;
    };
    std::vector<std::int64_t> own, in_slot, bare;
    for (int round = 0; round < 20; ++round) {
      for (int i = 0; i < 100; ++i) own.push_back(once(per_command));
      for (int i = 0; i < 100; ++i) in_slot.push_back(once(slot));
      for (int i = 0; i < 100; ++i) bare.push_back(once(none));
    }
    const double base = static_cast<double>(median(bare));
    std::printf("v2 (memory controller %s), /bin/true spawn+reap, median of 2000 each: none "
                "%.1f us, slot's cgroup %.1f us (%.3fx), own cgroup %.1f us (%.3fx)\n",
                per_command.measures_memory() ? "on" : "off", base / 1000,
                static_cast<double>(median(in_slot)) / 1000,
                static_cast<double>(median(in_slot)) / base,
                static_cast<double>(median(own)) / 1000,
                static_cast<double>(median(own)) / base);
  });
}

TEST_CASE("peak accuracy: measured minus allocated", "[.measure]") {
  with_open_slot(false, [](const test::TestCgroup&, SlotCgroup& slot) {
    for (const char* mib : {"1", "16", "64", "256", "1024"}) {
      std::vector<std::int64_t> excess, rss_excess;
      for (int i = 0; i < 5; ++i) {
        slot.begin_command();
        const auto started =
            test::start_in_slot(slot.procs_fd(), {test::helper("alloc_touch"), mib});
        const test::Reaped reaped = test::reap(started.pid);
        const CommandMemory memory = slot.end_command(started.join_error == 0);
        excess.push_back(memory.peak_bytes - (std::atoll(mib) << 20));
        rss_excess.push_back(reaped.max_rss_kb * 1024 - (std::atoll(mib) << 20));
      }
      std::sort(excess.begin(), excess.end());
      std::printf("%5s MiB: cgroup peak - allocated: min %lld, median %lld, max %lld KiB; "
                  "ru_maxrss - allocated: median %lld KiB\n",
                  mib, static_cast<long long>(excess.front() / 1024),
                  static_cast<long long>(median(excess) / 1024),
                  static_cast<long long>(excess.back() / 1024),
                  static_cast<long long>(median(rss_excess) / 1024));
    }
  });
}

}  // namespace
}  // namespace spawnpool::detail
