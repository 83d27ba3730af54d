// The CPU hint that keeps a driver thread and its spawner on one CPU for the hand-off.
//
// Why: a futex wake aimed at another, idle CPU costs that CPU's wake-up from halt; on a
// VM this is a hypervisor round trip (measured here: a driver<->spawner round trip takes
// 13-19 us on one CPU and 80-115 us across two). The driver thread goes to sleep as soon
// as it has handed a request over, so its own CPU is the one that is free at once. The
// driver therefore pins the sleeping spawner to its current CPU just before the wake
// (pin_task_to_cpu), and the spawner puts its own CPU set back (CpuSet::apply_to_calling_thread)
// before it starts the command, which inherits the spawner's CPU set and must be free to
// run anywhere. docs/architecture.md, "The CPU hint", has the measurements.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <vector>

namespace spawnpool::detail {

/// Restricts thread `tid` (a process's pid names its main thread) to `cpu`. False when
/// the kernel refuses (CPU outside the task's cpuset, no permission): the hint is then
/// simply not given.
bool pin_task_to_cpu(pid_t tid, int cpu);

/// A thread's CPU affinity mask, of whatever size the kernel needs.
class CpuSet {
 public:
  /// The calling thread's current mask; empty() if it cannot be read.
  static CpuSet of_calling_thread();
  bool empty() const { return words_.empty(); }
  /// Makes this the calling thread's mask. Does not move the thread off its current
  /// CPU when that CPU is in the mask.
  bool apply_to_calling_thread() const;

 private:
  std::vector<unsigned long> words_;  // cpu_set_t storage, sized like CPU_ALLOC's
};

}  // namespace spawnpool::detail
