#include "engine/src/pool/pool_memory.h"

#include <algorithm>

#include "engine/src/admission/admission_policy_setup.h"
#include "worker_pool/cgroup/cgroup_discovery.h"
#include "worker_pool/cgroup/cgroup_limits.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

// The `auto` budget's cgroup side: the tightest limit from the pool's parent (the
// driver's cgroup, or the one given) to the root, and that cgroup's usage less the
// inactive page cache, which the kernel takes back before it would OOM-kill anything.
class CgroupHeadroom final : public CgroupMemorySource {
 public:
  explicit CgroupHeadroom(CgroupHierarchy hierarchy) : hierarchy_(std::move(hierarchy)) {}
  Reading read() override {
    const CgroupMemoryStatus status = read_cgroup_memory_status(hierarchy_);
    Reading reading;
    if (!status.known) return reading;
    if (status.limit_bytes != kNoLimit)
      reading.limit_bytes = static_cast<std::uint64_t>(status.limit_bytes);
    reading.usage_bytes = static_cast<std::uint64_t>(
        std::max<std::int64_t>(0, status.usage_bytes - status.reclaimable_bytes));
    return reading;
  }

 private:
  CgroupHierarchy hierarchy_;
};

CgroupHierarchy hierarchy_for(const PoolOptions& options) {
  if (options.memory_cgroup_parent.empty()) return find_memory_hierarchy();
  CgroupHierarchy given;
  given.dir = options.memory_cgroup_parent;
  given.version = cgroup_version_of(given.dir);
  if (given.version == CgroupVersion::kV2) given.v2_dir = given.dir;
  return given;
}

std::string mib(std::int64_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MiB"; }

}  // namespace

PoolMemory::PoolMemory(const PoolOptions& options, std::uint32_t slots) : warn_(options.warn) {
  CgroupTreeOptions tree_options;
  tree_options.parent_dir = options.memory_cgroup_parent;
  std::string why_not;
  tree_ = CgroupTree::create(tree_options, slots, why_not);
  // Turned off on purpose, cgroups are not missed; elsewhere the user should know that
  // peaks, OOM kills and kill-all are weaker without them.
  if (!tree_ && !cgroups_disabled_by_environment())
    warn_("no per-slot memory cgroups (" + why_not +
          "); peaks come from ru_maxrss (the largest process of each command), OOM kills "
          "are not recognized, and cancel reaches only a command's process group");
  const CgroupHierarchy hierarchy = hierarchy_for(options);
  MemoryAdmissionConfig config;
  config.budget = options.memory_budget;
  config.history_path = options.memory_history_path;
  config.pressure_file = memory_pressure_file(hierarchy);
  if (hierarchy.version != CgroupVersion::kNone)
    config.cgroup = std::make_unique<CgroupHeadroom>(hierarchy);
  config.warn = warn_;  // its sentences name the file ("memory history PATH: ...")
  MemoryAdmission admission = make_memory_admission(std::move(config), monotonic_ns());
  history_ = std::move(admission.history);
  policy_ = std::move(admission.policy);
}

PoolMemory::~PoolMemory() { close(); }

std::unique_ptr<SchedulingPolicy> PoolMemory::take_policy() { return std::move(policy_); }

std::string PoolMemory::spawner_argument(std::uint32_t slot) const {
  return tree_ ? encode_slot_cgroup(tree_->slot_config(slot)) : std::string();
}

void PoolMemory::record(const JobInfo& job, const Result& result) {
  if (history_ && result.started())
    history_->record(job.key, result.peak_memory_bytes, result.exited_ns - result.started_ns);
}

// The history store itself stays until destruction: a waiter may still record a result
// that comes back while the pool closes.
void PoolMemory::close() {
  std::string why;
  if (tree_ && !tree_->close(why)) warn_("the pool's memory cgroups: " + why);
  if (history_) history_->flush();
}

std::string PoolMemory::oom_message(std::int64_t peak_bytes, std::int64_t budget_bytes) {
  return "killed by the kernel's OOM killer (peak " + mib(peak_bytes) +
         (budget_bytes > 0 ? ", budget " + mib(budget_bytes) : ", no budget known") + ")";
}

}  // namespace spawnpool::detail
