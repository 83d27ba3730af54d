// cgroup_spawner_stub CGROUP-ARGUMENT PROGRAM [ARGS...]: a spawner's cgroup part without
// the shared memory, for the driver-death tests. It opens its slot (SlotCgroup) from the
// argument the driver gives a spawner, starts PROGRAM there as the spawner's child will
// (join the slot before exec, own process group), sends "r" on its lifeline (fd 3, a
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
#include "worker_pool/cgroup/cgroup_join.h"
#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/cgroup/cgroup_sweep.h"

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
  const pid_t command = fork();
  if (command < 0) return fail("fork failed");
  if (command == 0) {
    if (join_cgroup_from_child(slot.procs_fd()) != 0) _exit(126);
    setpgid(0, 0);
    const int null_fd = open("/dev/null", O_RDWR);  // the command's output is not ours
    dup2(null_fd, 1);
    close(null_fd);
    execv(argv[2], argv + 2);
    _exit(127);
  }
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
