#include "worker_pool/protocol/cpu_affinity.h"

#include <cerrno>

namespace spawnpool::detail {

bool pin_task_to_current_cpu(pid_t tid, std::uint64_t allowed) {
  const int cpu = sched_getcpu();
  if (tid <= 0 || cpu < 0 || cpu >= 64 || !(allowed >> cpu & 1)) return false;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<std::size_t>(cpu), &set);
  return sched_setaffinity(tid, sizeof set, &set) == 0;
}

CpuSet CpuSet::of_calling_thread() {
  CpuSet result;
  if (sched_getaffinity(0, sizeof result.small_, &result.small_) == 0) {
    result.size_ = sizeof result.small_;
    return result;
  }
  // The kernel refuses a buffer smaller than its CPU count with EINVAL: grow until it fits.
  for (std::size_t cpus = 2 * CPU_SETSIZE; errno == EINVAL && cpus <= (1u << 20); cpus *= 2) {
    const std::size_t size = CPU_ALLOC_SIZE(cpus);
    result.large_.assign((size + sizeof(unsigned long) - 1) / sizeof(unsigned long), 0);
    if (sched_getaffinity(0, size, reinterpret_cast<cpu_set_t*>(result.large_.data())) == 0) {
      result.size_ = size;
      return result;
    }
  }
  result.large_.clear();
  return result;
}

std::uint64_t CpuSet::first_64_cpus() const {
  std::uint64_t bits = 0;
  for (std::size_t cpu = 0; cpu < 64 && cpu < 8 * size_; ++cpu)
    if (CPU_ISSET_S(cpu, size_, data())) bits |= std::uint64_t{1} << cpu;
  return bits;
}

const cpu_set_t* CpuSet::data() const {
  return large_.empty() ? &small_ : reinterpret_cast<const cpu_set_t*>(large_.data());
}

bool CpuSet::apply_to_calling_thread() const {
  return !empty() && sched_setaffinity(0, size_, data()) == 0;
}

}  // namespace spawnpool::detail
