// What the CPU-affinity tests share: a CpuSet as the child_state helper prints it, a CPU
// number no machine here has (a set of it alone is refused, as a set is after its cpuset
// shrank away from it), and a seccomp filter that makes sched_setaffinity fail with
// EPERM (as a sandbox's policy would). Header-only.
#pragma once

#include <sys/syscall.h>

#include <string>

#include "tests/unit/support/seccomp_support.h"
#include "worker_pool/protocol/cpu_affinity.h"

namespace spawnpool::test {

/// The last CPU of a CPU_SETSIZE mask: refused by the kernel on any machine with fewer.
inline constexpr int kAbsentCpu = CPU_SETSIZE - 1;

/// "0,1,3": the CPUs of `set` in the form child_state prints.
inline std::string cpu_list(const detail::CpuSet& set) {
  std::string out;
  for (int cpu = 0; cpu < static_cast<int>(8 * set.size_bytes()); ++cpu)
    if (set.has(cpu)) out += (out.empty() ? "" : ",") + std::to_string(cpu);
  return out;
}

/// Which sched_setaffinity calls the filter refuses.
enum class Refused { kOnItself, kAll };  // kOnItself: pid argument 0 only

/// Makes sched_setaffinity fail with EPERM (seccomp_support.h: forked copies only).
inline bool refuse_sched_setaffinity(Refused which) {
  if (which == Refused::kAll) return refuse_with_eperm(SYS_sched_setaffinity, {});
  return refuse_with_eperm(SYS_sched_setaffinity, {{0, 0}});
}

}  // namespace spawnpool::test
