// Puts memory-aware admission together for a pool: the history store (opened and read
// once), the budget over /proc/meminfo and the driver's cgroup, the pressure file, and
// the policy fed with the history's snapshot. Called once at pool start, on the thread
// that starts the pool; what it returns follows each part's own threading rules.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "engine/src/admission/admission_policy.h"
#include "engine/src/history/history_store.h"
#include "engine/src/admission/budget_meter.h"

namespace spawnpool::detail {

struct MemoryAdmissionConfig {
  MemoryBudget budget = MemoryBudget::automatic();  ///< kAuto or kBytes
  std::string history_path;      ///< empty: no history (cold every time, nothing written)
  /// An open history (the pool's) used instead of history_path.
  std::shared_ptr<HistoryStore> shared_history;
  /// The driver's cgroup's memory.pressure (memory_pressure_file()); empty or unreadable:
  /// /proc/pressure/memory.
  std::string pressure_file;
  /// The driver's cgroup limit and usage, for `auto` (from the cgroup layer); may be null.
  std::unique_ptr<CgroupMemorySource> cgroup;
  AdmissionOptions options;
  HistoryStoreOptions history_options;
  HistoryWarning warn;           ///< the history's one warning; called from any thread
};

struct MemoryAdmission {
  std::shared_ptr<HistoryStore> history;   ///< null without a history
  std::unique_ptr<MemoryAdmissionPolicy> policy;
};

/// Opens the history (its problems are warnings, never exceptions) and builds the policy.
MemoryAdmission make_memory_admission(MemoryAdmissionConfig config, std::int64_t now_ns);

}  // namespace spawnpool::detail
