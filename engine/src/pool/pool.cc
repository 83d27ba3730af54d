#include "spawnpool/pool.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "engine/src/command/prepare_command.h"
#include "engine/src/pool/pool_core.h"

namespace spawnpool {
namespace {

PoolOptions resolved(PoolOptions options) {
  if (options.slots == 0) options.slots = std::max(1u, std::thread::hardware_concurrency());
  if (options.spawner_path.empty()) {
    const char* from_env = std::getenv("SPAWNPOOL_SPAWNER");
    options.spawner_path = from_env && *from_env ? from_env : SPAWNPOOL_DEFAULT_SPAWNER;
  }
  if (options.output_chunk_bytes < 4096) options.output_chunk_bytes = 4096;
  if (!options.warn)
    options.warn = [](const std::string& message) {
      const std::string line = "spawnpool: warning: " + message + "\n";
      (void)!write(2, line.data(), line.size());  // one write: lines of threads never mix
    };
  const std::shared_ptr<Jobserver>& jobserver = options.jobserver;
  if (jobserver && !jobserver->usable() && jobserver->claim_warning())
    options.warn(jobserver->problem() + "; running one command at a time" +
                 (jobserver->hint().empty() ? "" : " (" + jobserver->hint() + ")"));
  return options;
}

}  // namespace

const char* stage_name(FailureStage stage) {
  switch (stage) {
    case FailureStage::kNone: return "";
    case FailureStage::kRequest: return "request";
    case FailureStage::kChdir: return "chdir";
    case FailureStage::kExec: return "exec";
    case FailureStage::kSpawner: return "spawner";
    case FailureStage::kSpawnerDied: return "spawner_died";
    case FailureStage::kPoolClosed: return "pool_closed";
  }
  return "unknown";
}

Job::Job() = default;

Job::Job(std::shared_ptr<detail::PoolCore> core, std::unique_ptr<detail::JobState> state)
    : core_(std::move(core)), state_(std::move(state)) {}

Job::Job(Job&& other) noexcept = default;

Job& Job::operator=(Job&& other) noexcept {
  if (this != &other) {
    discard();
    core_ = std::move(other.core_);
    state_ = std::move(other.state_);
  }
  return *this;
}

Job::~Job() { discard(); }

// Waits for a command nobody collected: its slot must come back.
void Job::discard() noexcept {
  if (state_ && core_) core_->wait(*state_, {}, std::chrono::milliseconds(100));
  state_.reset();
  core_.reset();
}

Pool::Pool(PoolOptions options)
    : core_(std::make_shared<detail::PoolCore>(resolved(std::move(options)))) {}

Pool::~Pool() { close(); }

Result Pool::run(const Command& command) {
  Job job = submit(command);
  return wait(job);
}

// A bare embedder's command goes through the door too: the defaults are decided there.
Job Pool::submit(const Command& command, const SubmitOptions& how) {
  detail::PreparedCommand prepared = detail::prepare_command(command);
  prepared.local = how.local;
  return Job(core_, core_->submit(prepared, true));
}

Job Pool::submit_prepared(detail::PreparedCommand& command) {
  return Job(core_, core_->submit(command, true));
}

std::optional<Job> Pool::try_submit(const Command& command, const SubmitOptions& how) {
  detail::PreparedCommand prepared = detail::prepare_command(command);
  prepared.local = how.local;
  std::unique_ptr<detail::JobState> state = core_->submit(prepared, false);
  if (!state) return std::nullopt;
  return Job(core_, std::move(state));
}

Result Pool::wait(Job& job, const WaitTick& tick, std::chrono::milliseconds tick_period) {
  if (!job.pending())
    throw std::logic_error("spawnpool::Pool::wait: this Job has no pending result");
  Result r = job.core_->wait(*job.state_, tick, tick_period);
  job.state_.reset();
  job.core_.reset();
  return r;
}

void Pool::cancel(const Job& job, int sig) {
  if (job.state_ && job.core_) job.core_->cancel(*job.state_, sig);
}

void Pool::cancel_all(int sig) { core_->cancel_all(sig); }
void Pool::interrupt(int sig) { core_->interrupt(sig); }
void Pool::close() { core_->close(); }
std::size_t Pool::slots() const { return core_->slot_count(); }
std::vector<int> Pool::spawner_pids() const { return core_->spawner_pids(); }

}  // namespace spawnpool
