#include "worker_pool/spawner/command_launcher.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "worker_pool/spawner/child_start.h"
#include "worker_pool/spawner/path_search.h"

namespace spawnpool::detail {
namespace {

// After a failed launch, tells whether the cwd was the cause (Popen reports the chdir
// failure first, since the child changes directory before it executes).
int cwd_error(const char* cwd) {
  if (cwd == nullptr) return 0;
  struct stat st;
  if (stat(cwd, &st) != 0) return errno;
  if (!S_ISDIR(st.st_mode)) return ENOTDIR;
  if (faccessat(AT_FDCWD, cwd, X_OK, AT_EACCESS) != 0) return errno;
  return 0;
}

LaunchedCommand failed(FailureStage stage, int error_number) {
  LaunchedCommand out;
  out.failure = stage;
  out.error_number = error_number;
  return out;
}

LaunchedCommand failed_launch(const DecodedRequest& request, int error_number) {
  if (int e = cwd_error(request.cwd)) return failed(FailureStage::kChdir, e);
  return failed(FailureStage::kExec, error_number);
}

struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
  bool open() {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return false;
    read_fd = fds[0];
    write_fd = fds[1];
    return true;
  }
  void close_write() {
    if (write_fd >= 0) close(write_fd);
    write_fd = -1;
  }
  void close_both() {
    close_write();
    if (read_fd >= 0) close(read_fd);
    read_fd = -1;
  }
};

// The spawner's /dev/null, the commands' stdin; opened once (again after a failure).
int dev_null_fd() {
  static int fd = -1;
  if (fd < 0) fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd;
}

// A tool written a moment ago may still be open for writing by a process that is
// exiting: exec then fails with ETXTBSY for a short while. Retry briefly.
ChildStart start_retrying_busy_text(const ChildSetup& setup) {
  ChildStart started;
  for (int attempt = 0; attempt < 50; ++attempt) {
    started = start_child(setup);
    if (started.failure != FailureStage::kExec || started.error_number != ETXTBSY) break;
    const timespec pause{0, 2 * 1000 * 1000};
    nanosleep(&pause, nullptr);
  }
  return started;
}

}  // namespace

void prepare_command_launch() {
  prepare_child_start();
  (void)dev_null_fd();
}

LaunchedCommand launch_command(const DecodedRequest& request, bool close_extra_fds,
                               const CpuSet* child_cpus, const CpuSet* every_cpu,
                               int cgroup_procs_fd, int cgroup_dir_fd) {
  int search_error = 0;
  const std::string program =
      search_path(request.argv[0], request.envp.data(), request.cwd, search_error);
  if (program.empty()) return failed_launch(request, search_error);

  const bool capture = request.flags & protocol::kCaptureOutput;
  const bool merge = request.flags & protocol::kMergeStderr;
  Pipe out, err;
  if (capture && (!out.open() || (!merge && !err.open()))) {
    const int e = errno;
    out.close_both();
    err.close_both();
    return failed(FailureStage::kSpawner, e);
  }
  ChildSetup setup;
  setup.path = program.c_str();
  setup.argv = request.argv.data();
  setup.envp = request.envp.data();
  setup.cwd = request.cwd;
  setup.stdin_fd = dev_null_fd();
  setup.stdout_fd = out.write_fd;
  setup.stderr_fd = capture ? (merge ? out.write_fd : err.write_fd) : -1;
  setup.close_extra_fds = close_extra_fds;
  static const pid_t spawner_pid = getpid();  // glibc no longer caches getpid()
  setup.parent_pid = spawner_pid;
  setup.cgroup_procs_fd = cgroup_procs_fd;
  setup.cgroup_dir_fd = cgroup_dir_fd;
  if (child_cpus && !child_cpus->empty()) {
    setup.cpus = child_cpus->data();
    setup.cpus_bytes = child_cpus->size_bytes();
    if (every_cpu && every_cpu->size_bytes() == child_cpus->size_bytes())
      setup.every_cpu = every_cpu->data();
  }
  const ChildStart started =
      setup.stdin_fd < 0 ? ChildStart{-1, FailureStage::kSpawner, errno}
                         : start_retrying_busy_text(setup);
  out.close_write();
  err.close_write();
  if (started.pid < 0) {
    out.close_both();
    err.close_both();
    LaunchedCommand failure = failed(started.failure, started.error_number);
    failure.launch_ns = started.launch_ns;
    return failure;
  }
  LaunchedCommand launched;
  launched.pid = started.pid;
  launched.launch_ns = started.launch_ns;
  launched.stdout_fd = out.read_fd;
  launched.stderr_fd = err.read_fd;
  launched.joined_cgroup =
      (cgroup_procs_fd >= 0 || cgroup_dir_fd >= 0) && started.cgroup_join_error == 0;
  // The child could not widen itself (a policy that forbids a thread its own
  // sched_setaffinity): from here, late (the program may have read its set already), but
  // better than leaving it on the one CPU for its whole life.
  if (started.cpu_set_error &&
      sched_setaffinity(started.pid, setup.cpus_bytes, setup.cpus) != 0 &&
      (!setup.every_cpu ||
       sched_setaffinity(started.pid, setup.cpus_bytes, setup.every_cpu) != 0))
    launched.cpu_set_error = started.cpu_set_error;
  return launched;
}

}  // namespace spawnpool::detail
