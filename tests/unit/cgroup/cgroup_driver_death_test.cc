// No cgroup and no process is left when the driver goes: a forked "driver" makes a
// pool's tree and starts one cgroup_spawner_stub per slot (the spawner's cgroup code,
// on a real lifeline socket), each running a command that leaves a process in another
// session. Then the driver is SIGKILLed (its spawners must remove everything), or it
// closes the pool with a goodbye on each lifeline (it removes everything itself).
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <sstream>

#include "worker_pool/cgroup/cgroup_tree.h"
#include "tests/unit/support/cgroup_test_support.h"
#include "tests/unit/support/test_support.h"
#include "worker_pool/cgroup/cgroup_files.h"

extern char** environ;

namespace spawnpool::detail {
namespace {

constexpr std::uint32_t kSlots = 3;

pid_t spawn_stub(const std::string& argument, int lifeline_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, lifeline_fd, 3);
  const std::string stub = test::helper("cgroup_spawner_stub");
  const std::string command = test::helper("double_fork_setsid");
  char* const argv[] = {const_cast<char*>(stub.c_str()), const_cast<char*>(argument.c_str()),
                        const_cast<char*>(command.c_str()), nullptr};
  pid_t pid = -1;
  if (posix_spawn(&pid, stub.c_str(), &actions, nullptr, argv, environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&actions);
  return pid;
}

// The forked driver: no Catch2 here. Reports "<pool dir>\n<stub pids>\n" on `report_fd`
// once every stub runs its command, then waits to be killed, or closes the pool.
[[noreturn]] void run_driver(const std::string& parent, int report_fd, bool close_pool) {
  CgroupTreeOptions options;
  options.parent_dir = parent;
  std::string why;
  auto tree = CgroupTree::create(options, kSlots, why);
  if (!tree) _exit(2);
  std::vector<int> lifelines;
  std::string pids;
  for (std::uint32_t n = 0; n < kSlots; ++n) {
    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) _exit(3);
    const pid_t stub = spawn_stub(encode_slot_cgroup(tree->slot_config(n)), sockets[1]);
    close(sockets[1]);
    char ready = 0;
    if (stub < 0 || recv(sockets[0], &ready, 1, 0) != 1 || ready != 'r') _exit(4);
    lifelines.push_back(sockets[0]);
    pids += std::to_string(stub) + " ";
  }
  const std::string report = tree->pool_dir() + "\n" + pids + "\n";
  if (write(report_fd, report.data(), report.size()) < 0) _exit(5);
  close(report_fd);
  if (!close_pool)
    for (;;) pause();
  // A pool's close: the goodbye tells each spawner that the driver lives and removes
  // the tree itself, after the spawners are reaped.
  for (int fd : lifelines) {
    send(fd, "g", 1, MSG_NOSIGNAL);
    close(fd);
  }
  bool stubs_clean = true;
  for (std::istringstream in(pids); in >> why;) {
    int status = 0;
    waitpid(std::atoi(why.c_str()), &status, 0);
    stubs_clean = stubs_clean && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  _exit(tree->close(why) && stubs_clean ? 0 : 6);
}

struct DriverRun {
  pid_t driver = -1;
  std::string pool_dir;
  std::vector<pid_t> stubs;
};

DriverRun start_driver(const std::string& parent, bool close_pool) {
  int report[2];
  REQUIRE(pipe2(report, O_CLOEXEC) == 0);
  DriverRun run;
  run.driver = fork();
  if (run.driver == 0) {
    close(report[0]);
    run_driver(parent, report[1], close_pool);
  }
  close(report[1]);
  std::istringstream text(test::read_until_eof(report[0]));
  std::getline(text, run.pool_dir);
  for (pid_t pid; text >> pid;) run.stubs.push_back(pid);
  return run;
}

// The processes left in each slot (or, v2, in its command's cgroup below it) by the
// commands: once the command and its intermediate child are gone, the escaped
// grandchild alone.
std::vector<pid_t> escaped_processes(const std::string& pool_dir) {
  std::vector<pid_t> all;
  for (std::uint32_t n = 0; n < kSlots; ++n) {
    std::vector<pid_t> listed;
    test::wait_until([&] {
      const std::string slot = pool_dir + "/" + slot_dir_name(n);
      std::string text, below;
      read_file_text(slot + "/cgroup.procs", text);
      for (const std::string& child : test::child_cgroups(slot))
        if (read_file_text(slot + "/" + child + "/cgroup.procs", below)) text += below;
      listed = parse_pid_list(text);
      return listed.size() == 1;
    });
    all.insert(all.end(), listed.begin(), listed.end());
  }
  return all;
}

TEST_CASE("driver SIGKILLed: its spawners kill every slot and remove the pool's cgroups",
          "[cgroup][tree][driver-death]") {
  test::with_test_cgroup(false, [](const test::TestCgroup& parent) {
    const DriverRun run = start_driver(parent.dir(), false);
    REQUIRE(!run.pool_dir.empty());
    REQUIRE(run.stubs.size() == kSlots);
    const std::vector<pid_t> escaped = escaped_processes(run.pool_dir);
    CHECK(escaped.size() == kSlots);
    kill(run.driver, SIGKILL);
    test::reap(run.driver);
    for (pid_t stub : run.stubs) {
      const test::Reaped reaped = test::reap(stub);  // reparented to us, the subreaper
      CHECK(WIFEXITED(reaped.status));
      CHECK(WEXITSTATUS(reaped.status) == 0);
    }
    CHECK(access(run.pool_dir.c_str(), F_OK) != 0);
    for (pid_t pid : escaped) CHECK(test::wait_until([&] { return test::process_is_gone(pid); }));
    CHECK(test::child_cgroups(parent.dir()).empty());
  });
}

TEST_CASE("a pool's close with goodbyes: the driver removes the tree itself",
          "[cgroup][tree][driver-death]") {
  test::with_test_cgroup(false, [](const test::TestCgroup& parent) {
    const DriverRun run = start_driver(parent.dir(), true);
    REQUIRE(!run.pool_dir.empty());
    const test::Reaped driver = test::reap(run.driver);
    CHECK(WIFEXITED(driver.status));
    CHECK(WEXITSTATUS(driver.status) == 0);
    CHECK(access(run.pool_dir.c_str(), F_OK) != 0);
    CHECK(test::child_cgroups(parent.dir()).empty());
  });
}

}  // namespace
}  // namespace spawnpool::detail
