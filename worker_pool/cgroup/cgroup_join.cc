#include "worker_pool/cgroup/cgroup_join.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace spawnpool::detail {

// Runs in a CLONE_VM child on the parent's memory and thread pointer: no sanitizer
// runtime may run here (its state belongs to the suspended parent), hence the attribute
// and noinline (an inlined copy would take the caller's instrumentation).
__attribute__((no_sanitize("address", "thread", "undefined"), noinline))
int join_cgroup_from_child(int procs_fd) {
  if (syscall(SYS_write, procs_fd, "0", 1) == 1) return 0;
  return errno != 0 ? errno : EIO;
}

}  // namespace spawnpool::detail
