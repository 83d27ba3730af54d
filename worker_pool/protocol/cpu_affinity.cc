#include "worker_pool/protocol/cpu_affinity.h"

#include <cerrno>
#include <cstring>
#include <utility>

namespace spawnpool::detail {
namespace {

constexpr std::size_t kMaxCpus = std::size_t{1} << 20;  // far above any NR_CPUS

std::size_t words_for(std::size_t bytes) {
  return (bytes + sizeof(unsigned long) - 1) / sizeof(unsigned long);
}

}  // namespace

CpuSet CpuSet::of_task(pid_t tid) {
  CpuSet result;
  if (sched_getaffinity(tid, sizeof result.small_, &result.small_) == 0) {
    result.size_ = sizeof result.small_;
    return result;
  }
  // The kernel refuses a buffer smaller than its CPU count with EINVAL: grow until it fits.
  for (std::size_t cpus = 2 * CPU_SETSIZE; errno == EINVAL && cpus <= kMaxCpus; cpus *= 2) {
    const std::size_t size = CPU_ALLOC_SIZE(cpus);
    result.large_.assign(words_for(size), 0);
    if (sched_getaffinity(tid, size, reinterpret_cast<cpu_set_t*>(result.large_.data())) == 0) {
      result.size_ = size;
      return result;
    }
  }
  result.large_.clear();
  return result;
}

CpuSet CpuSet::of_cpu(int cpu) {
  CpuSet result;
  if (cpu < 0) return result;
  const std::size_t index = static_cast<std::size_t>(cpu);
  if (index < CPU_SETSIZE) {
    result.size_ = sizeof result.small_;
  } else {
    result.size_ = CPU_ALLOC_SIZE(index + 1);
    result.large_.assign(words_for(result.size_), 0);
  }
  CPU_SET_S(index, result.size_, result.bits());
  return result;
}

bool CpuSet::has(int cpu) const {
  return cpu >= 0 && static_cast<std::size_t>(cpu) < 8 * size_ &&
         CPU_ISSET_S(static_cast<std::size_t>(cpu), size_, data());
}

int CpuSet::count() const { return empty() ? 0 : CPU_COUNT_S(size_, data()); }

CpuSet CpuSet::every_cpu() const {
  CpuSet result = *this;
  if (result.empty()) result.size_ = sizeof result.small_;
  std::memset(result.bits(), 0xff, result.size_);
  return result;
}

int CpuSet::apply_to(pid_t tid) const {
  if (empty()) return EINVAL;
  return sched_setaffinity(tid, size_, data()) == 0 ? 0 : errno;
}

const cpu_set_t* CpuSet::data() const {
  return large_.empty() ? &small_ : reinterpret_cast<const cpu_set_t*>(large_.data());
}

cpu_set_t* CpuSet::bits() { return const_cast<cpu_set_t*>(data()); }

bool CpuSet::operator==(const CpuSet& other) const {
  const std::size_t wider = size_ > other.size_ ? size_ : other.size_;
  for (std::size_t cpu = 0; cpu < 8 * wider; ++cpu)
    if (has(static_cast<int>(cpu)) != other.has(static_cast<int>(cpu))) return false;
  return true;
}

bool pin_task_to_current_cpu(pid_t tid, CpuSet* before) {
  if (tid <= 0) return false;
  const int cpu = sched_getcpu();
  CpuSet own = CpuSet::of_task(tid);
  if (!own.has(cpu)) return false;
  if (CpuSet::of_cpu(cpu).apply_to(tid) != 0) return false;
  if (before) *before = std::move(own);
  return true;
}

CpuGiveBack give_back_cpus(pid_t tid, const CpuSet& own) {
  CpuGiveBack result;
  result.error_number = own.apply_to(tid);
  if (result.error_number == 0) return result;
  result.how = own.every_cpu().apply_to(tid) == 0 ? CpuGiveBack::How::kWidened
                                                  : CpuGiveBack::How::kFailed;
  return result;
}

CpuGiveBack give_back_cpus(const CpuSet& own) { return give_back_cpus(0, own); }

}  // namespace spawnpool::detail
