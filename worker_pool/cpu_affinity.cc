#include "worker_pool/cpu_affinity.h"

#include <sched.h>

#include <cerrno>

namespace spawnpool::detail {

bool pin_task_to_cpu(pid_t tid, int cpu) {
  // Once per command: no allocation below CPU_SETSIZE (1,024) CPUs.
  if (cpu < 0) return false;
  const auto index = static_cast<std::size_t>(cpu);
  if (index < CPU_SETSIZE) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(index, &set);
    return sched_setaffinity(tid, sizeof set, &set) == 0;
  }
  const std::size_t size = CPU_ALLOC_SIZE(index + 1);
  std::vector<unsigned long> words((size + sizeof(unsigned long) - 1) / sizeof(unsigned long));
  auto* set = reinterpret_cast<cpu_set_t*>(words.data());
  CPU_ZERO_S(size, set);
  CPU_SET_S(index, size, set);
  return sched_setaffinity(tid, size, set) == 0;
}

CpuSet CpuSet::of_calling_thread() {
  CpuSet result;
  // The kernel refuses a buffer smaller than its CPU count with EINVAL: grow until it fits.
  for (std::size_t cpus = CPU_SETSIZE; cpus <= (1u << 20); cpus *= 2) {
    const std::size_t size = CPU_ALLOC_SIZE(cpus);
    result.words_.assign((size + sizeof(unsigned long) - 1) / sizeof(unsigned long), 0);
    if (sched_getaffinity(0, size, reinterpret_cast<cpu_set_t*>(result.words_.data())) == 0)
      return result;
    if (errno != EINVAL) break;
  }
  result.words_.clear();
  return result;
}

bool CpuSet::apply_to_calling_thread() const {
  if (empty()) return false;
  return sched_setaffinity(0, words_.size() * sizeof(unsigned long),
                           reinterpret_cast<const cpu_set_t*>(words_.data())) == 0;
}

}  // namespace spawnpool::detail
