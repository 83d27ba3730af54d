// What a memory budget (PoolOptions::memory_budget) adds to a pool: the per-slot cgroups
// (CgroupTree) and what each spawner is told of its slot, the history store, the
// admission policy over both, the pool's measured usage for the trace, and the OOM
// message. Made at pool start before the spawners, closed after they are reaped; a pool
// without a budget has none of it. Threading: construction, take_policy() and close() on
// the thread that starts or closes the pool; the const members and record() from any
// thread; warnings go to the pool's sink, never under a lock of ours.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/src/admission/admission_policy.h"
#include "worker_pool/cgroup/cgroup_tree.h"
#include "engine/src/history/history_store.h"
#include "spawnpool/pool.h"

namespace spawnpool::detail {

class PoolMemory {
 public:
  /// Sets up cgroups (or says once, through options.warn, why there are none), opens
  /// the history and builds the policy. Never throws for a memory problem.
  PoolMemory(const PoolOptions& options, std::uint32_t slots);
  ~PoolMemory();  ///< close()
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  /// The admission policy, for the pool's Scheduler (once).
  std::unique_ptr<SchedulingPolicy> take_policy();
  /// The per-slot cgroups, or null where there are none (the spawners then measure
  /// with ru_maxrss).
  const CgroupTree* cgroups() const { return tree_.get(); }
  /// Spawner `slot`'s cgroup argument (encode_slot_cgroup()); "" without cgroups.
  std::string spawner_argument(std::uint32_t slot) const;
  /// The pool's cgroup usage now (one read), 0 without cgroups.
  std::int64_t usage_bytes() const { return tree_ ? tree_->usage_bytes() : 0; }

  /// A command ended with `result`: its peak goes into the history (O(1), no I/O).
  void record(const JobInfo& job, const Result& result);

  /// Removes the cgroups (call after the spawners are reaped) and writes what the
  /// history still holds. Idempotent.
  void close();

  /// "killed by the kernel's OOM killer (peak N MiB, budget M MiB)".
  static std::string oom_message(std::int64_t peak_bytes, std::int64_t budget_bytes);

 private:
  std::function<void(const std::string&)> warn_;
  std::unique_ptr<CgroupTree> tree_;
  std::unique_ptr<HistoryStore> history_;
  std::unique_ptr<MemoryAdmissionPolicy> policy_;  // until take_policy()
};

}  // namespace spawnpool::detail
