// The driver side of a pool's cgroups: the tree's layout and removal, and the fallbacks
// (turned off, not writable, no memory controller).
#include <grp.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>

#include "worker_pool/cgroup/cgroup_discovery.h"
#include "worker_pool/cgroup/cgroup_tree.h"
#include "tests/unit/support/cgroup_test_support.h"
#include "tests/unit/support/test_support.h"
#include "worker_pool/cgroup/cgroup_files.h"
#include "worker_pool/cgroup/cgroup_slot.h"

namespace spawnpool::detail {
namespace {

using test::TestCgroup;

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

std::string listed_processes(const std::string& dir) {
  std::string text;
  read_file_text(dir + "/cgroup.procs", text);
  return text;
}

TEST_CASE("a pool's tree: one cgroup per slot below the driver's, all gone at close",
          "[cgroup][tree]") {
  const CgroupHierarchy driver = find_memory_hierarchy();
  TEST_SKIP_UNLESS(driver.version != CgroupVersion::kNone, driver.why_not);
  std::string why;
  auto tree = CgroupTree::create({}, 3, why);
  TEST_SKIP_UNLESS(tree, why);
  const std::string pool = tree->pool_dir();
  CHECK(tree->version() == driver.version);
  CHECK(pool.rfind(driver.dir + "/spawnpool-" + std::to_string(getpid()) + "-", 0) == 0);
  for (std::uint32_t n = 0; n < 3; ++n) {
    CHECK(exists(pool + "/slot-" + std::to_string(n) + "/cgroup.procs"));
    SlotCgroupConfig decoded;
    REQUIRE(decode_slot_cgroup(encode_slot_cgroup(tree->slot_config(n)), decoded, why));
    SlotCgroup slot;
    REQUIRE(slot.open(decoded, why));
    CHECK(slot.measures_memory());
  }
  CHECK_FALSE(exists(pool + "/slot-3"));
  auto second = CgroupTree::create({}, 1, why);  // another pool of the same process
  REQUIRE(second);
  CHECK(second->pool_dir() != pool);
  CHECK(tree->close(why));
  CHECK_FALSE(exists(pool));
  CHECK(tree->close(why));  // idempotent
  second.reset();           // the destructor closes
  CHECK(listed_processes(driver.dir).find(std::to_string(getpid())) != std::string::npos);
}

// Starts double_fork_setsid in `slot` of `tree`; returns the process it leaves behind.
pid_t leave_process_in(const CgroupTree& tree, std::uint32_t slot_index) {
  SlotCgroup slot;
  std::string why;
  REQUIRE(slot.open(tree.slot_config(slot_index), why));
  slot.begin_command();  // v2: its own cgroup below the slot, left busy by the process
  const auto started = test::start_in(slot, {test::helper("double_fork_setsid")}, true);
  const std::string printed = test::read_until_eof(started.stdout_fd);
  const pid_t escaped = static_cast<pid_t>(std::atoi(printed.c_str()));
  test::reap(started.pid);
  REQUIRE(escaped > 0);
  return escaped;
}

TEST_CASE("close and kill_slot end what commands left behind", "[cgroup][tree]") {
  test::with_test_cgroup(false, [](const TestCgroup& parent) {
    CgroupTreeOptions options;
    options.parent_dir = parent.dir();
    std::string why;
    auto tree = CgroupTree::create(options, 2, why);
    REQUIRE(tree);
    const pid_t escaped[] = {leave_process_in(*tree, 0), leave_process_in(*tree, 1)};
    // A spawner died: its slot is emptied and stays for the replacement.
    CHECK(tree->kill_slot(0));
    CHECK(test::wait_until([&] { return test::process_is_gone(escaped[0]); }));
    CHECK(exists(tree->pool_dir() + "/slot-0"));
    CHECK_FALSE(test::process_is_gone(escaped[1]));
    const std::string pool = tree->pool_dir();
    CHECK(tree->close(why));
    CHECK(test::process_is_gone(escaped[1]));
    CHECK_FALSE(exists(pool));
  });
}

TEST_CASE("cgroups off by SPAWNPOOL_DISABLE_CGROUPS=1: no tree, and the reason",
          "[cgroup][tree][fallback]") {
  setenv(kDisableCgroupsEnv, "1", 1);
  std::string why;
  const auto tree = CgroupTree::create({}, 2, why);
  unsetenv(kDisableCgroupsEnv);
  CHECK_FALSE(tree);
  CHECK(why == "SPAWNPOOL_DISABLE_CGROUPS=1");
}

// Runs CgroupTree::create() as user nobody in a child process; returns its reason.
std::string create_as_nobody(const std::string& parent) {
  int report[2];
  REQUIRE(pipe2(report, O_CLOEXEC) == 0);
  const pid_t child = fork();
  if (child == 0) {
    close(report[0]);
    std::string why = "still root";
    if (setgroups(0, nullptr) == 0 && setresgid(65534, 65534, 65534) == 0 &&
        setresuid(65534, 65534, 65534) == 0) {
      CgroupTreeOptions options;
      options.parent_dir = parent;
      why = CgroupTree::create(options, 2, why) ? "created" : why;
    }
    if (write(report[1], why.data(), why.size()) < 0) _exit(1);
    _exit(0);
  }
  close(report[1]);
  const std::string why = test::read_until_eof(report[0]);
  test::reap(child);
  return why;
}

TEST_CASE("a hierarchy the driver may not write to: no tree, the reason, nothing left",
          "[cgroup][tree][fallback]") {
  std::string why;
  const auto parent = TestCgroup::in_memory_hierarchy(why);
  TEST_SKIP_UNLESS(parent, why);
  TEST_SKIP_UNLESS(getuid() == 0, "needs root to become another user");
  SECTION("another user's cgroup") {
    why = create_as_nobody(parent->dir());
    CHECK(why.find("cannot create " + parent->dir() + "/spawnpool-") == 0);
    CHECK(why.find("Permission denied") != std::string::npos);
  }
  SECTION("a directory that is not a cgroup") {
    test::TempDir plain;
    CgroupTreeOptions options;
    options.parent_dir = plain.path();
    CHECK_FALSE(CgroupTree::create(options, 2, why));
    CHECK(why.find("is not a cgroup") != std::string::npos);
  }
  SECTION("a v2 hierarchy without the memory controller, memory required") {
    const auto unified = TestCgroup::in_unified_hierarchy(why);
    TEST_SKIP_UNLESS(unified, why);
    std::string controllers;
    read_file_text(unified->dir() + "/cgroup.controllers", controllers);
    TEST_SKIP_UNLESS(controllers.find("memory") == std::string::npos,
                            "this v2 hierarchy has the memory controller");
    CgroupTreeOptions options;
    options.parent_dir = unified->dir();
    CHECK_FALSE(CgroupTree::create(options, 2, why));
    CHECK(why.find("memory") != std::string::npos);
    CHECK(listed_processes(unified->dir()).empty());
  }
  CHECK(test::child_cgroups(parent->dir()).empty());  // nothing left behind
}

TEST_CASE("v2 without controllers: the tree still places and kills (cgroup.kill)",
          "[cgroup][tree][v2]") {
  test::with_test_cgroup(true, [](const TestCgroup& unified) {
    CgroupTreeOptions options;
    options.parent_dir = unified.dir();
    options.require_memory = false;
    std::string why;
    auto tree = CgroupTree::create(options, 1, why);
    REQUIRE(tree);
    CHECK(tree->version() == CgroupVersion::kV2);
    const pid_t escaped = leave_process_in(*tree, 0);
    CHECK(test::cgroup_of(escaped, CgroupVersion::kV2).find("/slot-0") != std::string::npos);
    const std::string pool = tree->pool_dir();
    CHECK(tree->close(why));
    CHECK(test::process_is_gone(escaped));
    CHECK_FALSE(exists(pool));
  });
}

}  // namespace
}  // namespace spawnpool::detail
