// cgroup_spawner_stub CGROUP-ARGUMENT PROGRAM [ARGS...]: a spawner's cgroup part without
// the shared memory, for the driver-death tests. It opens its slot (SlotCgroup) from the
// argument the driver gives a spawner, starts PROGRAM there with the spawner's own
// start_child() (born in a command cgroup below the slot, or joining the slot, as the
// spawner's probe would choose; own process group; output to /dev/null), sends "r" on its lifeline (fd 3, a
// SOCK_SEQPACKET socket) once started, then reads the lifeline: "g" (the driver's
// goodbye) then EOF is a pool's close, EOF alone the driver's death. Then it cleans up
// as a spawner will (clean_up_slot_cgroups), reaps PROGRAM and exits 0, or 1 with the
// reason on stderr.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>

#include "worker_pool/cgroup/cgroup_config.h"
#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/cgroup/cgroup_sweep.h"
#include "worker_pool/spawner/child_start.h"

namespace {

constexpr int kLifelineFd = 3;

int fail(const std::string& why) {
  std::fprintf(stderr, "cgroup_spawner_stub: %s\n", why.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spawnpool::detail;
  if (argc < 3) return fail("usage: cgroup_spawner_stub CGROUP-ARGUMENT PROGRAM [ARGS...]");
  SlotCgroupConfig config;
  std::string why;
  SlotCgroup slot;
  if (!decode_slot_cgroup(argv[1], config, why) || !slot.open(config, why)) return fail(why);
  slot.begin_command();
  if (slot.per_command()) {  // the spawner's probe, in short
    const int error = probe_clone_into_cgroup(slot.command_cgroup_fd());
    if (error != 0 && !slot.use_slot_cgroup(why)) return fail(why);
    if (error != 0) slot.begin_command();
  }
  const int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);  // its output is not ours
  ChildSetup setup;
  setup.path = argv[2];
  setup.argv = argv + 2;
  setup.envp = environ;
  setup.stdin_fd = null_fd;
  setup.stdout_fd = null_fd;
  setup.cgroup_procs_fd = slot.procs_fd();
  setup.cgroup_dir_fd = slot.command_cgroup_fd();
  const ChildStart started = start_child(setup);
  if (started.pid < 0) return fail("cannot start the command");
  if (started.cgroup_join_error != 0) return fail("the command did not join its cgroup");
  const pid_t command = started.pid;
  send(kLifelineFd, "r", 1, MSG_NOSIGNAL);
  bool goodbye = false;
  for (;;) {
    char message = 0;
    const ssize_t n = recv(kLifelineFd, &message, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    goodbye = goodbye || message == 'g';
  }
  const bool clean = clean_up_slot_cgroups(slot, !goodbye, why);
  while (waitpid(command, nullptr, 0) < 0 && errno == EINTR) {
  }
  return clean ? 0 : fail(why);
}
