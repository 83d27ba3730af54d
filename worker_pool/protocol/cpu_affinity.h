// The CPU hints that keep each driver <-> spawner hand-off on one CPU, and the checked
// give-back that ends each hint.
//
// Why: a futex wake aimed at another CPU that is idle costs that CPU's wake-up from
// halt; on a VM that is a round trip through the hypervisor (measured here: a
// driver<->spawner round trip takes 13-19 us on one CPU and 80-115 us across two). The
// side that hands the turn over goes to sleep right after, so its own CPU is the one
// that is free at once. Linux has no "wake and sleep" futex call that would keep the
// woken side there (pipes' sync wake-ups still spread to idle CPUs), so the waker pins
// the sleeper to its current CPU just before the wake (pin_task_to_current_cpu) and the
// woken side puts its own CPU set back (give_back_cpus): the driver thread at once, the
// spawner once it has started the command on that CPU (child_start.h).
// docs/architecture.md, "The CPU hint", has the protocol and the measurements.
// Threading: free functions and a value type, no shared state.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <cstddef>
#include <vector>

namespace spawnpool::detail {

/// A CPU affinity mask of whatever size the kernel needs (CPU numbers have no fixed
/// bound: NR_CPUS goes to 8,192). No allocation up to CPU_SETSIZE (1,024) CPUs: the
/// driver reads one per command.
class CpuSet {
 public:
  /// The calling thread's current mask; empty() if it cannot be read.
  static CpuSet of_calling_thread() { return of_task(0); }
  /// Thread `tid`'s current mask (a process's pid names its main thread; 0: the caller);
  /// empty() if it cannot be read.
  static CpuSet of_task(pid_t tid);
  /// The set of CPU `cpu` alone (any index); empty() if `cpu` < 0.
  static CpuSet of_cpu(int cpu);
  bool empty() const { return size_ == 0; }
  bool has(int cpu) const;
  int count() const;
  /// The same size with every CPU set: what the kernel narrows to a thread's cpuset.
  CpuSet every_cpu() const;
  /// Makes this thread `tid`'s mask (0: the caller): 0, or the errno of the refusal.
  /// Does not move the thread off its current CPU when that CPU is in the mask.
  int apply_to(pid_t tid) const;
  int apply_to_calling_thread() const { return apply_to(0); }
  /// The mask as sched_setaffinity takes it (for a raw call in a child before exec).
  const cpu_set_t* data() const;
  std::size_t size_bytes() const { return size_; }
  bool operator==(const CpuSet& other) const;

 private:
  cpu_set_t* bits();
  std::size_t size_ = 0;                 // bytes of the mask; 0: unknown
  cpu_set_t small_{};                    // the mask when it fits CPU_SETSIZE
  std::vector<unsigned long> large_;     // the mask of a machine with more CPUs
};

/// Restricts thread `tid` to the calling thread's current CPU, if thread `tid`'s own set
/// has that CPU (a thread that was given CPUs, by taskset or a cpuset, keeps to them).
/// The set is read from the kernel at each pin, not published by the sleeper in shared
/// memory: a fixed-size mask there would cap the CPU numbers it can carry (it was CPUs
/// 0-63), one read costs 0.15 us, and the live set is the one the kernel checks anyway.
/// False when the CPU is not in the set, or the kernel refuses: the hint is not given.
/// `before`, if set, receives the set read (to undo the pin from outside).
bool pin_task_to_current_cpu(pid_t tid, CpuSet* before = nullptr);

/// How a give-back after a pin went.
struct CpuGiveBack {
  enum class How {
    kRestored,  // the thread has its own set again
    kWidened,   // its own set was refused (a cpuset changed under it: no CPU of it is
                // allowed now): it has every CPU its cpuset allows instead
    kFailed,    // both were refused (a seccomp or LSM policy): it stays where it is
  };
  How how = How::kRestored;
  int error_number = 0;  // why its own set was refused; 0 when restored
};

/// Gives the calling thread `own` back after a pin (an empty `own` counts as refused),
/// else every CPU its cpuset allows, so that a refused set never leaves it on the one
/// CPU it was pinned to. The caller reports anything but kRestored (once).
CpuGiveBack give_back_cpus(const CpuSet& own);
/// The same for thread `tid`, from outside (the pinner undoing its pin).
CpuGiveBack give_back_cpus(pid_t tid, const CpuSet& own);

}  // namespace spawnpool::detail
