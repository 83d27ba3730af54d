// cgroup v2's no-internal-processes rule, on plain files standing for a delegated v2
// cgroup: this machine's v2 hierarchy has no memory controller to delegate, so the
// move itself is not exercised; these tests pin when the driver refuses to leave home
// (home untouched) and the order in which restore_driver_home() puts things back.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

#include "worker_pool/cgroup/cgroup_v2_home.h"
#include "tests/unit/support/test_support.h"
#include "worker_pool/cgroup/cgroup_config.h"
#include "worker_pool/cgroup/cgroup_files.h"
#include "worker_pool/cgroup/cgroup_sweep.h"

namespace spawnpool::detail {
namespace {

struct FakeHome {
  test::TempDir dir;
  FakeHome(const std::string& subtree, const std::string& controllers, const std::string& procs) {
    set("cgroup.subtree_control", subtree);
    set("cgroup.controllers", controllers);
    set("cgroup.procs", procs);
  }
  void set(const std::string& file, const std::string& text) const {
    std::ofstream(dir / file, std::ios::trunc) << text;
  }
  std::string get(const std::string& file) const { return test::read_file(dir / file); }
};

std::string own_pid() { return std::to_string(getpid()); }

TEST_CASE("v2 home: memory already given to the children, nothing to do", "[cgroup][v2]") {
  const FakeHome home("memory pids\n", "cpu memory pids\n", "");
  std::string where, why;
  std::uint32_t flags = 99;
  CHECK(leave_v2_home(home.dir.path(), where, flags, why));
  CHECK(where == home.dir.path());
  CHECK(flags == 0);
}

TEST_CASE("v2 home: the driver stays where it cannot leave, home untouched", "[cgroup][v2]") {
  std::string where, why;
  std::uint32_t flags = 0;
  SECTION("no memory controller delegated") {
    const FakeHome home("", "cpu pids\n", own_pid() + "\n");
    CHECK_FALSE(leave_v2_home(home.dir.path(), where, flags, why));
    CHECK(why.find("not delegated") != std::string::npos);
    CHECK(home.get("cgroup.subtree_control").empty());
  }
  SECTION("another process shares the driver's cgroup") {
    const FakeHome home("", "memory pids\n", "1\n" + own_pid() + "\n");
    CHECK_FALSE(leave_v2_home(home.dir.path(), where, flags, why));
    CHECK(why.find("systemd-run --user --scope -p Delegate=yes") != std::string::npos);
    CHECK(home.get("cgroup.subtree_control").empty());
    CHECK(home.get("cgroup.procs") == "1\n" + own_pid() + "\n");
  }
  CHECK(flags == 0);
  CHECK(test::read_file("/proc/self/cgroup").find("/spawnpool-" + own_pid() + "-driver") ==
        std::string::npos);  // not moved into a leaf
}

TEST_CASE("v2 home: a driver already in its leaf finds home above it", "[cgroup][v2]") {
  const FakeHome home("memory\n", "memory\n", "");
  const std::string leaf = home.dir / ("spawnpool-" + own_pid() + "-driver");
  std::string where, why;
  std::uint32_t flags = 0;
  CHECK(leave_v2_home(leaf, where, flags, why));
  CHECK(where == home.dir.path());
  CHECK((flags & kDriverLeftHome) != 0);
}

TEST_CASE("v2 home restore: memory off first, then the processes back, then the leaf",
          "[cgroup][v2]") {
  const FakeHome home("memory\n", "memory\n", "");
  const std::string leaf_name = "spawnpool-4242-driver";
  REQUIRE(mkdir((home.dir / leaf_name).c_str(), 0755) == 0);
  std::ofstream(home.dir / (leaf_name + "/cgroup.procs")) << "4242\n4243\n";
  std::string why;
  SECTION("another pool of the driver remains: its last spawner restores") {
    REQUIRE(mkdir((home.dir / "spawnpool-4242-00ff").c_str(), 0755) == 0);
    CHECK(restore_driver_home(home.dir.path(), 4242, kDriverLeftHome | kEnabledMemoryAtHome, why));
    CHECK(home.get("cgroup.subtree_control") == "memory\n");
    CHECK(home.get("cgroup.procs").empty());
  }
  SECTION("the driver never left: nothing to do") {
    CHECK(restore_driver_home(home.dir.path(), 4242, 0, why));
    CHECK(home.get("cgroup.subtree_control") == "memory\n");
  }
  SECTION("the last pool is gone") {
    // Plain files: the writes land as written, and the leaf (a real directory with a
    // file in it) cannot be removed, which the real cgroup file system allows.
    CHECK_FALSE(restore_driver_home(home.dir.path(), 4242,
                                    kDriverLeftHome | kEnabledMemoryAtHome, why));
    CHECK(home.get("cgroup.subtree_control").rfind("-memory", 0) == 0);
    CHECK(home.get("cgroup.procs").rfind("4243", 0) == 0);  // each pid written in turn
    CHECK(why.find("cannot remove") != std::string::npos);
  }
}

}  // namespace
}  // namespace spawnpool::detail
