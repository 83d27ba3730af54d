// What a memory budget (PoolOptions::memory_budget) adds to a pool: the per-slot cgroups
// (CgroupTree) and what each spawner is told of its slot, the admission policy over
// them and the history's snapshot (the pool owns the history), the pool's measured usage for the trace, and the OOM
// message. Made at pool start before the spawners, closed after they are reaped; a pool
// without a budget has none of it. Without slot cgroups it still recognises OOM kills,
// from the driver's cgroup's counter. Threading: construction, take_policy() and close()
// on the thread that starts or closes the pool; the const members and record() from any
// thread; warnings go to the pool's sink, never under a lock of ours.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "engine/src/admission/admission_policy.h"
#include "worker_pool/cgroup/cgroup_oom_count.h"
#include "worker_pool/cgroup/cgroup_tree.h"
#include "engine/src/history/history_store.h"
#include "spawnpool/pool.h"

namespace spawnpool::detail {

class PoolMemory {
 public:
  /// Sets up cgroups (or says once, through options.warn, why there are none) and builds
  /// the policy from `history`'s snapshot (null: none). Never throws for a memory problem.
  PoolMemory(const PoolOptions& options, std::uint32_t slots,
             std::shared_ptr<HistoryStore> history);
  ~PoolMemory();  ///< close()
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;

  /// The admission policy, for the pool's Scheduler (once).
  std::unique_ptr<SchedulingPolicy> take_policy();
  /// The per-slot cgroups, or null where there are none (the spawners then measure
  /// with ru_maxrss).
  const CgroupTree* cgroups() const { return tree_.get(); }
  /// Spawner `slot`'s second argument: its cgroup (encode_slot_cgroup()), or without
  /// slot cgroups protocol::kReachDescendantsArgument (kill-all as their subreaper).
  std::string spawner_argument(std::uint32_t slot) const;
  /// The pool's cgroup usage now (one read), 0 without cgroups.
  std::int64_t usage_bytes() const { return tree_ ? tree_->usage_bytes() : 0; }
  /// Without slot cgroups, the OOM kills counted where the commands run (the driver's
  /// memory cgroup, else the machine), read just before a command is handed over; -1
  /// with slot cgroups (their spawners count per slot) or when there is no counter.
  std::int64_t oom_kills_now() const;
  /// Without slot cgroups: marks `result` OOM-killed when the command failed (an error
  /// exit, as a compiler driver gives for its killed cc1plus, or SIGKILL) and the counter
  /// rose since `oom_kills_before` (oom_kills_now() at its hand-over). The retry that
  /// follows is the slot cgroups'.
  void recognise_oom_kill(std::int64_t oom_kills_before, Result& result) const;

  /// Removes the cgroups (call after the spawners are reaped). Idempotent.
  void close();

  /// "killed by the kernel's OOM killer (peak N MiB, budget M MiB)".
  static std::string oom_message(std::int64_t peak_bytes, std::int64_t budget_bytes);

 private:
  std::function<void(const std::string&)> warn_;
  std::unique_ptr<CgroupTree> tree_;
  OomKillCount oom_count_;  // open only without tree_
  std::unique_ptr<MemoryAdmissionPolicy> policy_;  // until take_policy()
};

}  // namespace spawnpool::detail
