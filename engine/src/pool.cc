#include "spawnpool/pool.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "pool_core.h"

namespace spawnpool {
namespace {

PoolOptions resolved(PoolOptions options) {
  if (options.slots == 0) options.slots = std::max(1u, std::thread::hardware_concurrency());
  if (options.spawner_path.empty()) {
    const char* from_env = std::getenv("SPAWNPOOL_SPAWNER");
    options.spawner_path = from_env && *from_env ? from_env : SPAWNPOOL_DEFAULT_SPAWNER;
  }
  if (options.output_chunk_bytes < 4096) options.output_chunk_bytes = 4096;
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
  }
  return "unknown";
}

Job::Job(Job&& other) noexcept
    : core_(std::move(other.core_)),
      slot_(other.slot_),
      pending_(other.pending_),
      result_(std::move(other.result_)) {
  other.slot_ = -1;
  other.pending_ = false;
}

Job& Job::operator=(Job&& other) noexcept {
  if (this != &other) {
    if (pending_ && core_) core_->wait(*this, {}, std::chrono::milliseconds(100));
    core_ = std::move(other.core_);
    slot_ = other.slot_;
    pending_ = other.pending_;
    result_ = std::move(other.result_);
    other.slot_ = -1;
    other.pending_ = false;
  }
  return *this;
}

Job::~Job() {
  if (pending_ && core_) core_->wait(*this, {}, std::chrono::milliseconds(100));
}

Pool::Pool(PoolOptions options)
    : core_(std::make_shared<detail::PoolCore>(resolved(std::move(options)))) {}

Pool::~Pool() { close(); }

Result Pool::run(const Command& command) {
  Job job = submit(command);
  return wait(job);
}

Job Pool::submit(const Command& command) {
  Job job;
  core_->submit(command, true, job);
  return job;
}

std::optional<Job> Pool::try_submit(const Command& command) {
  Job job;
  if (!core_->submit(command, false, job)) return std::nullopt;
  return job;
}

Result Pool::wait(Job& job, const WaitTick& tick, std::chrono::milliseconds tick_period) {
  if (!job.pending_)
    throw std::logic_error("spawnpool::Pool::wait: this Job has no pending result");
  return core_->wait(job, tick, tick_period);
}

void Pool::cancel(const Job& job, int sig) {
  if (job.core_ && job.slot_ >= 0) core_->cancel(job.slot_, sig);
}

void Pool::cancel_all(int sig) { core_->cancel_all(sig); }
void Pool::close() { core_->close(); }
std::size_t Pool::slots() const { return core_->slot_count(); }
std::vector<int> Pool::spawner_pids() const { return core_->spawner_pids(); }

}  // namespace spawnpool
