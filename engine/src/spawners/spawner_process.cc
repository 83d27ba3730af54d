#include "engine/src/spawners/spawner_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "worker_pool/protocol/protocol.h"

extern char** environ;

namespace spawnpool::detail {
namespace {

[[noreturn]] void fail(int error_number, const std::string& what) {
  throw std::system_error(error_number, std::generic_category(), what);
}

// The spawner starts with default signal dispositions and an empty mask whatever the
// driver (Python ignores SIGPIPE) set, stdin /dev/null, stdout/stderr shared with the
// driver (commands in passthrough mode write there), and no other descriptor but the
// segment and its lifeline. It stays in the driver's process group so that a terminal's
// Ctrl-C reaches it; it forwards the signal to its command.
// Every set-up call may fail (ENOMEM): the first error is returned, and nothing starts.
int spawn(pid_t* pid, const std::string& path, int segment_fd, int lifeline_fd,
          std::uint32_t slot, const std::string& cgroup_argument) {
  posix_spawnattr_t attr;
  int rc = posix_spawnattr_init(&attr);
  if (rc != 0) return rc;
  posix_spawn_file_actions_t actions;
  rc = posix_spawn_file_actions_init(&actions);
  if (rc != 0) {
    posix_spawnattr_destroy(&attr);
    return rc;
  }
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  if (!rc) rc = posix_spawnattr_setsigdefault(&attr, &all);
  if (!rc) rc = posix_spawnattr_setsigmask(&attr, &none);
  if (!rc) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  if (!rc) rc = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&actions, segment_fd, protocol::kSegmentFd);
  if (!rc) rc = posix_spawn_file_actions_adddup2(&actions, lifeline_fd, protocol::kLifelineFd);
  if (!rc) rc = posix_spawn_file_actions_addclosefrom_np(&actions, protocol::kLifelineFd + 1);

  const std::string slot_arg = std::to_string(slot);
  char* const argv[] = {const_cast<char*>("spawnpool-spawner"),
                        const_cast<char*>(slot_arg.c_str()),
                        cgroup_argument.empty() ? nullptr
                                                : const_cast<char*>(cgroup_argument.c_str()),
                        nullptr};
  if (!rc) rc = posix_spawn(pid, path.c_str(), &actions, &attr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc;
}

}  // namespace

SpawnerProcess launch_spawner(const std::string& path, int segment_fd, std::uint32_t slot,
                              const std::string& cgroup_argument) {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0)
    fail(errno, "socketpair for a spawner lifeline");
  // Above fd 4, so the dup2 to fd 3 cannot overwrite it before it is moved to fd 4.
  const int child_end = fcntl(sockets[1], F_DUPFD_CLOEXEC, protocol::kLifelineFd + 1);
  close(sockets[1]);
  if (child_end < 0) {
    close(sockets[0]);
    fail(errno, "dup of a spawner lifeline");
  }
  SpawnerProcess spawner;
  const int rc = spawn(&spawner.pid, path, segment_fd, child_end, slot, cgroup_argument);
  close(child_end);
  if (rc != 0) {
    close(sockets[0]);
    fail(rc, "starting spawner " + path);
  }
  spawner.lifeline_fd = sockets[0];
  spawner.pidfd = static_cast<int>(syscall(SYS_pidfd_open, spawner.pid, 0));
  return spawner;
}

void release_spawner(SpawnerProcess& spawner) {
  if (spawner.lifeline_fd >= 0) close(spawner.lifeline_fd);
  if (spawner.pidfd >= 0) close(spawner.pidfd);
  spawner.lifeline_fd = spawner.pidfd = -1;
}

LifelineSend send_on_lifeline(int lifeline_fd, const protocol::CancelMessage& message) {
  if (lifeline_fd < 0) return LifelineSend::kGone;
  ssize_t sent;
  do sent = send(lifeline_fd, &message, sizeof message, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (sent < 0 && errno == EINTR);
  if (sent == static_cast<ssize_t>(sizeof message)) return LifelineSend::kSent;
  // ENOBUFS too: the kernel is short of buffers for now, not the spawner gone.
  if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == ENOBUFS))
    return LifelineSend::kWouldBlock;
  return LifelineSend::kGone;  // EPIPE, ECONNRESET: the spawner's end is closed
}

void say_goodbye(const SpawnerProcess& spawner) {
  // Lost, the spawner would take the EOF for the driver's death and remove the pool's
  // cgroups itself: give a full lifeline a moment to drain.
  for (int round = 0; round < 100; ++round) {
    if (send_on_lifeline(spawner.lifeline_fd, protocol::kGoodbye) != LifelineSend::kWouldBlock)
      return;
    pollfd room{spawner.lifeline_fd, POLLOUT, 0};
    (void)poll(&room, 1, 10);
  }
}

}  // namespace spawnpool::detail
