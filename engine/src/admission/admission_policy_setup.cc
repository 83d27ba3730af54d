#include "engine/src/admission/admission_policy_setup.h"

#include "engine/src/admission/memory_pressure.h"

namespace spawnpool::detail {

MemoryAdmission make_memory_admission(MemoryAdmissionConfig config, std::int64_t now_ns) {
  MemoryAdmission admission;
  HistorySnapshot snapshot;
  if (config.shared_history) {
    admission.history = std::move(config.shared_history);
  } else if (!config.history_path.empty()) {
    admission.history = std::make_shared<HistoryStore>(config.history_path,
                                                       config.history_options, config.warn);
  }
  if (admission.history) snapshot = *admission.history->snapshot();
  std::unique_ptr<SystemMemorySource> system;
  if (config.budget.mode == MemoryBudget::Mode::kAuto) system = std::make_unique<ProcMeminfo>();
  auto budget = std::make_unique<BudgetMeter>(config.budget, std::move(config.cgroup),
                                              std::move(system));
  admission.policy = std::make_unique<MemoryAdmissionPolicy>(
      config.options, std::move(budget), open_memory_pressure(config.pressure_file),
      std::move(snapshot), now_ns);
  return admission;
}

}  // namespace spawnpool::detail
