// The CPU hints that keep each driver <-> spawner hand-off on one CPU.
//
// Why: a futex wake aimed at another CPU that is idle costs that CPU's wake-up from
// halt; on a VM that is a round trip through the hypervisor (measured here: a
// driver<->spawner round trip takes 13-19 us on one CPU and 80-115 us across two). The
// side that hands the turn over goes to sleep right after, so its own CPU is the one
// that is free at once. Linux has no "wake and sleep" futex call that would keep the
// woken side there (pipes' sync wake-ups still spread to idle CPUs), so the waker pins
// the sleeper to its current CPU just before the wake (pin_task_to_current_cpu) and the woken
// side puts its own CPU set back (CpuSet::apply_to_calling_thread): the driver thread at
// once, the spawner once it has started the command on that CPU (child_start.h).
// docs/architecture.md, "The CPU hint", has the protocol and the measurements.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spawnpool::detail {

/// Restricts thread `tid` (a process's pid names its main thread) to the calling
/// thread's current CPU, if that CPU is in `allowed`: the thread's own set as published
/// by first_64_cpus() (the kernel checks cpusets, not a thread's own choice). False when
/// it is not, or the kernel refuses: the hint is then simply not given.
bool pin_task_to_current_cpu(pid_t tid, std::uint64_t allowed);

/// A thread's CPU affinity mask, of whatever size the kernel needs. No allocation up to
/// CPU_SETSIZE (1,024) CPUs: the driver reads one per command.
class CpuSet {
 public:
  /// The calling thread's current mask; empty() if it cannot be read.
  static CpuSet of_calling_thread();
  bool empty() const { return size_ == 0; }
  /// CPUs 0-63 of the set as a bitmap (bit n: CPU n).
  std::uint64_t first_64_cpus() const;
  /// Makes this the calling thread's mask. Does not move the thread off its current
  /// CPU when that CPU is in the mask.
  bool apply_to_calling_thread() const;
  /// The mask as sched_setaffinity takes it (for a raw call in a child before exec).
  const cpu_set_t* data() const;
  std::size_t size_bytes() const { return size_; }

 private:
  std::size_t size_ = 0;                 // bytes of the mask; 0: unknown
  cpu_set_t small_{};                    // the mask when it fits CPU_SETSIZE
  std::vector<unsigned long> large_;     // the mask of a machine with more CPUs
};

}  // namespace spawnpool::detail
