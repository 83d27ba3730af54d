#include "engine/src/pool/pool_memory.h"

#include <signal.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>

#include "engine/src/admission/admission_policy_setup.h"
#include "worker_pool/cgroup/cgroup_discovery.h"
#include "worker_pool/cgroup/cgroup_limits.h"
#include "worker_pool/cgroup/cgroup_systemd_scope.h"
#include "worker_pool/protocol/monotonic_clock.h"
#include "worker_pool/protocol/protocol.h"

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

bool read_only(const std::string& dir) {
  struct statvfs fs {};
  return statvfs(dir.c_str(), &fs) == 0 && (fs.f_flag & ST_RDONLY);
}

// The one thing a user can do to get slot cgroups back, for the warning.
std::string how_to_get_cgroups(const CgroupHierarchy& hierarchy) {
  if (hierarchy.version == CgroupVersion::kNone) return "";
  if (read_only(hierarchy.dir))
    return " To get them back, give the container a writable cgroup tree (docker run "
           "--privileged mounts it read-write).";
  if (hierarchy.version == CgroupVersion::kV2)
    return std::string(" To get them back, start the build in a cgroup delegated to you: ") +
           kDelegatedScopeCommand + ".";
  return " To get them back, run the build as root (cgroup v1 delegates nothing to users).";
}

// No root, with systemd (cgroup_systemd_scope.h): where the driver's v2 cgroup is not
// its to write, the user manager moves the driver into a delegated scope of its own
// and the pool's tree is made there (the spawners, the driver's children, follow it).
// Not when cgroups are off, a parent was given, the hierarchy is v1 (nothing is
// delegated there) or the tree is read-only (a container: no manager can change that).
std::unique_ptr<CgroupTree> tree_in_delegated_scope(const PoolOptions& options,
                                                    const CgroupTreeOptions& tree_options,
                                                    std::uint32_t slots, std::string& why_not) {
  if (cgroups_disabled_by_environment() || !options.memory_cgroup_parent.empty()) return nullptr;
  const CgroupHierarchy hierarchy = find_memory_hierarchy();
  const bool v2 = hierarchy.version == CgroupVersion::kV2 ||
                  (hierarchy.version == CgroupVersion::kNone && !hierarchy.v2_dir.empty());
  if (!v2 || read_only(hierarchy.version == CgroupVersion::kV2 ? hierarchy.dir : hierarchy.v2_dir))
    return nullptr;
  std::uint64_t bits = 0;
  if (getrandom(&bits, sizeof bits, 0) != sizeof bits) bits = static_cast<std::uint64_t>(monotonic_ns());
  std::string why;
  if (!start_delegated_scope(delegated_scope_request(getpid(), bits), std::chrono::seconds(15),
                             why)) {
    why_not += "; " + why;
    return nullptr;
  }
  std::string why_in_scope;
  std::unique_ptr<CgroupTree> tree = CgroupTree::create(tree_options, slots, why_in_scope);
  if (!tree) why_not = "in the delegated scope systemd gave: " + why_in_scope;
  return tree;
}

const char* oom_count_name(const OomKillCount& count) {
  return count.source() == OomCountSource::kMachine ? "the machine's" : "the driver's cgroup's";
}

std::string mib(std::int64_t bytes) { return std::to_string((bytes + kMiB / 2) / kMiB) + " MiB"; }

}  // namespace

PoolMemory::PoolMemory(const PoolOptions& options, std::uint32_t slots,
                       std::shared_ptr<HistoryStore> history)
    : warn_(options.warn) {
  CgroupTreeOptions tree_options;
  tree_options.parent_dir = options.memory_cgroup_parent;
  std::string why_not;
  tree_ = CgroupTree::create(tree_options, slots, why_not);
  if (!tree_) tree_ = tree_in_delegated_scope(options, tree_options, slots, why_not);
  const CgroupHierarchy hierarchy = hierarchy_for(options);
  // Without slot cgroups the commands stay in the driver's memory cgroup: its counter
  // (readable also in a read-only tree) tells OOM kills apart from other SIGKILLs.
  if (!tree_)
    oom_count_.open(options.memory_cgroup_parent.empty() ? hierarchy : find_memory_hierarchy());
  // Turned off on purpose, cgroups are not missed; elsewhere the user should know what
  // is lost without them, and the one thing that gives it back.
  if (!tree_ && !cgroups_disabled_by_environment())
    warn_("no per-slot memory cgroups (" + why_not +
          "). Without them each command's peak is its largest single process (ru_maxrss), "
          "not its whole process tree, and cancel and close reach what left a command's "
          "process group only while the spawner (its subreaper) still holds it, not what "
          "a service manager took over. OOM kills are still " +
          (oom_count_.is_open() ? std::string("recognised (") + oom_count_name(oom_count_) +
                                      " counter, " + oom_count_.path() +
                                      ") and run again alone."
                                : std::string("not recognised: no OOM-kill counter is readable.")) +
          how_to_get_cgroups(hierarchy));
  MemoryAdmissionConfig config;
  config.budget = options.memory_budget;
  config.shared_history = std::move(history);
  config.pressure_file = memory_pressure_file(hierarchy);
  if (hierarchy.version != CgroupVersion::kNone)
    config.cgroup = std::make_unique<CgroupHeadroom>(hierarchy);
  config.warn = warn_;  // its sentences name the file ("memory history PATH: ...")
  MemoryAdmission admission = make_memory_admission(std::move(config), monotonic_ns());
  policy_ = std::move(admission.policy);
}

PoolMemory::~PoolMemory() { close(); }

std::unique_ptr<SchedulingPolicy> PoolMemory::take_policy() { return std::move(policy_); }

std::string PoolMemory::spawner_argument(std::uint32_t slot) const {
  return tree_ ? encode_slot_cgroup(tree_->slot_config(slot))
               : std::string(protocol::kReachDescendantsArgument);
}

std::int64_t PoolMemory::oom_kills_now() const {
  std::int64_t count = -1;
  return oom_count_.read(count) ? count : -1;
}

// The OOM killer sends SIGKILL to the process that uses the most memory, which is often
// not the command but a program it started: gcc reports a killed cc1plus as exit 1
// ("Killed signal terminated program cc1plus"), a shell a killed last command as 128+9.
// So a command that failed in any way but another signal while the counter rose is taken
// for OOM-killed. A real failure, or a kill from elsewhere, that falls in that window
// costs one run alone (which then fails as before), never a result.
void PoolMemory::recognise_oom_kill(std::int64_t oom_kills_before, Result& result) const {
  if (tree_ || oom_kills_before < 0 || !result.started()) return;
  const bool failed = result.returncode > 0 || result.returncode == -SIGKILL;
  if (!failed) return;
  const std::int64_t now = oom_kills_now();
  if (now > oom_kills_before) result.oom_killed = true;
}

void PoolMemory::close() {
  std::string why;
  if (tree_ && !tree_->close(why)) warn_("the pool's memory cgroups: " + why);
}

std::string PoolMemory::oom_message(std::int64_t peak_bytes, std::int64_t budget_bytes) {
  return "killed by the kernel's OOM killer (peak " + mib(peak_bytes) +
         (budget_bytes > 0 ? ", budget " + mib(budget_bytes) : ", no budget known") + ")";
}

}  // namespace spawnpool::detail
