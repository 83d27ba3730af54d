// Finding the driver's memory cgroup from /proc texts (v1, v2, hybrid, namespaces, bind
// mounts), reading its limit and usage, and locating its memory.pressure.
#include <unistd.h>

#include <catch2/catch.hpp>

#include "worker_pool/cgroup/cgroup_discovery.h"
#include "worker_pool/cgroup/cgroup_limits.h"
#include "tests/unit/support/cgroup_test_support.h"
#include "worker_pool/cgroup/cgroup_files.h"

namespace spawnpool::detail {
namespace {

// The hybrid layout of this project's machines: v1 memory, v2 without controllers.
constexpr const char* kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

constexpr const char* kUnifiedMountinfo =
    "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
    "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

TEST_CASE("hybrid: the v1 memory hierarchy, and the v2 cgroup for pressure",
          "[cgroup][discovery]") {
  const CgroupHierarchy found = parse_memory_hierarchy(
      "9:name=systemd:/\n4:memory:/process_api/921a\n1:cpu:/\n0::/\n", kHybridMountinfo);
  CHECK(found.version == CgroupVersion::kV1);
  CHECK(found.dir == "/sys/fs/cgroup/memory/process_api/921a");
  CHECK(found.v2_dir == "/sys/fs/cgroup/unified");
}

TEST_CASE("unified: a delegated scope deep in the v2 tree", "[cgroup][discovery]") {
  const std::string scope = "/user.slice/user-1000.slice/user@1000.service/app.slice/run-u5.scope";
  const CgroupHierarchy found = parse_memory_hierarchy("0::" + scope + "\n", kUnifiedMountinfo);
  CHECK(found.version == CgroupVersion::kV2);
  CHECK(found.dir == "/sys/fs/cgroup" + scope);
  CHECK(found.v2_dir == found.dir);
}

TEST_CASE("namespaces and bind mounts: paths are taken relative to the mount's root",
          "[cgroup][discovery]") {
  SECTION("a cgroup namespace: the process sits at its root") {
    const CgroupHierarchy found = parse_memory_hierarchy("0::/\n", kUnifiedMountinfo);
    CHECK(found.version == CgroupVersion::kV2);
    CHECK(found.dir == "/sys/fs/cgroup");
  }
  SECTION("a v1 subtree bind-mounted, controllers sharing a hierarchy, escaped spaces") {
    const std::string mountinfo =
        "50 31 0:32 /docker/abc /sys/fs/cgroup/my\\040mem ro,relatime - cgroup cgroup "
        "rw,cpu,memory\n";
    CgroupHierarchy found = parse_memory_hierarchy("5:cpu,memory:/docker/abc/sub\n", mountinfo);
    CHECK(found.version == CgroupVersion::kV1);
    CHECK(found.dir == "/sys/fs/cgroup/my mem/sub");
    found = parse_memory_hierarchy("5:cpu,memory:/docker/abc\n", mountinfo);
    CHECK(found.dir == "/sys/fs/cgroup/my mem");
    found = parse_memory_hierarchy("5:cpu,memory:/docker/abcdef\n", mountinfo);
    CHECK(found.version == CgroupVersion::kNone);  // a sibling, not below the mount's root
    CHECK_FALSE(found.why_not.empty());
  }
  SECTION("a cgroup outside the namespace's view") {
    const CgroupHierarchy found =
        parse_memory_hierarchy("0::/../../elsewhere\n", kUnifiedMountinfo);
    CHECK(found.version == CgroupVersion::kNone);
  }
}

TEST_CASE("no memory cgroup: a reason instead", "[cgroup][discovery]") {
  CgroupHierarchy found = parse_memory_hierarchy("1:name=systemd:/\n", kHybridMountinfo);
  CHECK(found.version == CgroupVersion::kNone);
  CHECK_FALSE(found.why_not.empty());
  found = parse_memory_hierarchy("0::/x\n", "22 1 8:1 / / rw - ext4 /dev/sda1 rw\n");
  CHECK(found.version == CgroupVersion::kNone);
  CHECK(unescape_mount_path("a\\040b\\011c\\134d\\01") == "a b\tc\\d\\01");
}

TEST_CASE("this process's memory cgroup is found and readable", "[cgroup][discovery]") {
  const CgroupHierarchy found = find_memory_hierarchy();
  TEST_SKIP_UNLESS(found.version != CgroupVersion::kNone, found.why_not);
  CHECK(cgroup_version_of(found.dir) == found.version);
  const std::string path = test::cgroup_of(getpid(), found.version);
  INFO("dir " << found.dir << ", /proc/self/cgroup path " << path);
  if (path != "/")
    CHECK((found.dir.size() > path.size() &&
           found.dir.compare(found.dir.size() - path.size(), path.size(), path) == 0));
  const CgroupMemoryStatus status = read_cgroup_memory_status(found);
  CHECK(status.known);
  CHECK(status.usage_bytes > 0);
  CHECK((status.limit_bytes == kNoLimit || status.limit_bytes > 0));
  CHECK(status.reclaimable_bytes >= 0);
}

TEST_CASE("the tightest limit of a cgroup and its ancestors binds", "[cgroup][discovery]") {
  std::string why;
  const auto parent = test::TestCgroup::in_memory_hierarchy(why);
  TEST_SKIP_UNLESS(parent, why);
  const std::string child = parent->make_child("inner");
  REQUIRE(!child.empty());
  const bool v1 = parent->version() == CgroupVersion::kV1;
  const char* limit_file = v1 ? "/memory.limit_in_bytes" : "/memory.max";
  REQUIRE(write_file_text(parent->dir() + limit_file, std::to_string(512LL << 20)));
  REQUIRE(write_file_text(child + limit_file, std::to_string(1LL << 30)));
  CgroupHierarchy hierarchy;
  hierarchy.version = parent->version();
  hierarchy.dir = child;
  CgroupMemoryStatus status = read_cgroup_memory_status(hierarchy);
  CHECK(status.known);
  CHECK(status.limit_bytes == 512LL << 20);
  CHECK(status.limiting_dir == parent->dir());
  REQUIRE(write_file_text(child + limit_file, std::to_string(256LL << 20)));
  status = read_cgroup_memory_status(hierarchy);
  CHECK(status.limit_bytes == 256LL << 20);
  CHECK(status.limiting_dir == child);
  CHECK(status.usage_bytes >= 0);
}

TEST_CASE("memory.pressure: the driver's v2 cgroup's, never the root's", "[cgroup][discovery]") {
  CgroupHierarchy hierarchy = find_memory_hierarchy();
  const bool at_root = !hierarchy.v2_dir.empty() &&
                       cgroup_version_of(hierarchy.v2_dir + "/..") != CgroupVersion::kV2;
  if (at_root)
    CHECK(memory_pressure_file(hierarchy).empty());  // at the root: /proc/pressure/memory
  std::string why;
  const auto unified = test::TestCgroup::in_unified_hierarchy(why);
  TEST_SKIP_UNLESS(unified, why);
  hierarchy.v2_dir = unified->dir();
  CHECK(memory_pressure_file(hierarchy) == unified->dir() + "/memory.pressure");
  const std::string leaf = unified->make_child("spawnpool-123-driver");
  REQUIRE(!leaf.empty());
  hierarchy.v2_dir = leaf;  // a driver that left home is measured with its pools
  CHECK(memory_pressure_file(hierarchy) == unified->dir() + "/memory.pressure");
  hierarchy.v2_dir.clear();
  CHECK(memory_pressure_file(hierarchy).empty());
}

}  // namespace
}  // namespace spawnpool::detail
