// spawnpool-spawner: one per job slot, started by the driver through posix_spawn (never
// by forking the driver) and alive for the whole build. It finds the segment on fd 3 and
// the lifeline socket to the driver on fd 4; argv[1] is its slot index, and argv[2], when
// the pool has a memory budget, its slot's cgroup (encode_slot_cgroup()) or, without slot
// cgroups, protocol::kReachDescendantsArgument.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "worker_pool/cgroup/cgroup_config.h"
#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/spawner/child_start.h"
#include "worker_pool/spawner/command_launcher.h"
#include "worker_pool/spawner/descendants.h"
#include "worker_pool/spawner/driver_watch.h"
#include "worker_pool/protocol/protocol.h"
#include "worker_pool/spawner/slot_server.h"

namespace {

using namespace spawnpool;

// "1": commands join their slot's cgroup even where a cgroup per command works (to
// compare the two, bench_projects/command_cgroup_cost.py; tests of the fallback).
constexpr const char* kSlotCgroupsOnlyEnv = "SPAWNPOOL_SLOT_CGROUPS_ONLY";

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "spawnpool-spawner: %s: %s\n", what, std::strerror(errno));
  std::exit(125);
}

bool close_range_works() {
  if (const char* off = std::getenv("SPAWNPOOL_DISABLE_CLOSE_RANGE"); off && *off == '1')
    return false;
  // Closing an empty range costs nothing and tells whether the kernel (>= 5.9) and any
  // seccomp profile allow the call.
  return syscall(SYS_close_range, ~0U - 1, ~0U - 1, 0) == 0;
}

// Whatever the driver leaked to us beyond fds 0-4 goes; ours stay close-on-exec, so the
// commands we start inherit nothing even where close_range is refused.
void close_inherited_fds(bool use_close_range) {
  const int first = protocol::kLifelineFd + 1;
  if (use_close_range && syscall(SYS_close_range, first, ~0U, 0) == 0) return;
  std::vector<int> extra;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (dirent* entry = readdir(dir)) {
      const int fd = std::atoi(entry->d_name);
      if (fd >= first && fd != dirfd(dir)) extra.push_back(fd);
    }
    closedir(dir);
  }
  for (int fd : extra) close(fd);
}

// Signal dispositions survive exec: a driver that ignores SIGCHLD would have our
// children reaped behind our back, and one that ignores SIGPIPE is harmless to us.
void reset_signal_state() {
  if (signal(SIGCHLD, SIG_DFL) == SIG_ERR) die("resetting SIGCHLD");
  // We write only to sockets with MSG_NOSIGNAL, but be sure.
  if (signal(SIGPIPE, SIG_IGN) == SIG_ERR) die("ignoring SIGPIPE");
  sigset_t none;
  sigemptyset(&none);
  if ((errno = pthread_sigmask(SIG_SETMASK, &none, nullptr)) != 0)
    die("clearing the signal mask");
  if (!detail::block_forwarded_signals()) die("blocking the forwarded signals");
}

struct MappedSegment {
  void* base;
  protocol::SegmentHeader header;
};

MappedSegment map_segment(std::uint64_t page_size) {
  struct stat st;
  if (fstat(protocol::kSegmentFd, &st) != 0) die("no segment on fd 3");
  void* base = mmap(nullptr, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED,
                    protocol::kSegmentFd, 0);
  if (base == MAP_FAILED) die("mmap of the segment");
  close(protocol::kSegmentFd);  // the mapping keeps the segment alive
  const auto header = *static_cast<const protocol::SegmentHeader*>(base);
  if (!protocol::header_is_valid(header, st.st_size, page_size)) {
    errno = EPROTO;
    die("segment header is invalid");
  }
  return {base, header};
}

// A cgroup per command needs clone3(CLONE_INTO_CGROUP) (kernel 5.7+, no seccomp filter
// against clone3): asked once, by starting a child that exits at once in a fresh command
// cgroup. Where it is refused, the commands join the slot's own cgroup, as before: a
// missing feature silently, anything else (this cgroup refused) with one line.
void choose_command_cgroups(detail::SlotCgroup& slot_cgroup) {
  const char* off = std::getenv(kSlotCgroupsOnlyEnv);
  int error = off && std::strcmp(off, "1") == 0 ? ENOSYS : 0;
  if (error == 0) {
    slot_cgroup.begin_command();
    const int fd = slot_cgroup.command_cgroup_fd();
    error = fd >= 0 ? detail::probe_clone_into_cgroup(fd) : (errno ? errno : EIO);
    slot_cgroup.end_command(false);
  }
  if (error == 0) return;
  if (error != ENOSYS && error != EINVAL && error != E2BIG)
    std::fprintf(stderr,
                 "spawnpool-spawner: cannot start a command in a cgroup of its own (%s); "
                 "commands join the slot's cgroup\n", std::strerror(error));
  std::string why;
  if (!slot_cgroup.use_slot_cgroup(why))
    std::fprintf(stderr, "spawnpool-spawner: %s\n", why.c_str());
}

// The slot's cgroup, opened once for every command of this spawner. A cgroup that cannot
// be used costs the measurement, not the build: one line says why, and commands run
// without it (peaks from ru_maxrss, kills by process group).
void open_slot_cgroup(const char* argument, detail::SlotCgroup& slot_cgroup) {
  detail::SlotCgroupConfig config;
  std::string why;
  if (!detail::decode_slot_cgroup(argument, config, why) || !slot_cgroup.open(config, why)) {
    std::fprintf(stderr, "spawnpool-spawner: %s; running without a cgroup\n", why.c_str());
    return;
  }
  if (slot_cgroup.per_command()) choose_command_cgroups(slot_cgroup);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s SLOT [CGROUP] (started by the spawnpool engine)\n", argv[0]);
    return 2;
  }
  reset_signal_state();
  const bool use_close_range = close_range_works();
  close_inherited_fds(use_close_range);
  // Without its lifeline a spawner would never learn that the driver is gone.
  if (fcntl(protocol::kLifelineFd, F_SETFD, FD_CLOEXEC) != 0) die("no lifeline on fd 4");

  const std::uint64_t page_size = sysconf(_SC_PAGESIZE);
  const MappedSegment segment = map_segment(page_size);
  const long index = std::strtol(argv[1], nullptr, 10);
  if (index < 0 || index >= static_cast<long>(segment.header.slot_count)) {
    errno = EINVAL;
    die("slot index out of range");
  }
  const protocol::SlotView slot =
      protocol::slot_at(segment.base, segment.header, static_cast<std::uint32_t>(index),
                        page_size);
  slot.control->spawner_pid.store(getpid());

  // Static: the watch thread uses both until the process exits.
  static detail::SlotCgroup slot_cgroup;
  const bool descendants =
      argc == 3 && std::strcmp(argv[2], protocol::kReachDescendantsArgument) == 0;
  if (argc == 3 && !descendants) open_slot_cgroup(argv[2], slot_cgroup);
  // Kill-all without a cgroup: what leaves a command's group stays our descendant.
  const bool subreaper = descendants && detail::become_subreaper();
  static detail::RunningChild running(&slot_cgroup, subreaper);
  if (!detail::start_driver_watch(protocol::kLifelineFd, running, slot_cgroup,
                                  slot.control->stop_signal))
    die("starting the watch thread");
  // Before attaching, so the first command pays no one-time set-up (issue 13: the stats'
  // pool overhead of a short script was mostly the first command's).
  detail::prepare_command_launch();
  detail::SlotServer(slot, segment.header, running, slot_cgroup, use_close_range).serve();
}
