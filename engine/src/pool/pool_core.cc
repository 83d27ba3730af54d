#include "engine/src/pool/pool_core.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <system_error>

#include "engine/src/command/command_key.h"
#include "engine/src/pool/command_fields.h"
#include "engine/src/scheduler/fifo_policy.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kRequestSlack = PATH_MAX + 4096;  // room for the cwd and counts

std::uint64_t exec_arg_max() {
  const long arg_max = sysconf(_SC_ARG_MAX);  // follows RLIMIT_STACK / 4
  if (arg_max <= 0) throw std::system_error(EINVAL, std::generic_category(), "sysconf(ARG_MAX)");
  return static_cast<std::uint64_t>(arg_max);
}

// An errno for OSError-style callers of the engine's own stages (Result::error_number).
int error_number_for(FailureStage stage) {
  return stage == FailureStage::kPoolClosed ? ESHUTDOWN : ECHILD;
}

Result failure(FailureStage stage, int error_number, std::string message) {
  Result r;
  r.failure = stage;
  r.error_number = error_number;
  r.error_message = std::move(message);
  return r;
}

std::string launch_failure_message(FailureStage stage, int error_number,
                                   const JobState& job) {
  const std::string reason = std::strerror(error_number);
  if (stage == FailureStage::kChdir)
    return "cannot enter working directory '" + job.cwd + "' for '" + job.program + "': " +
           reason;
  return "cannot execute '" + job.program + "': " + reason;
}

// A complete reply: the command's outcome, or the stage its launch failed at.
void take_reply(const protocol::ReplyHeader& h, const JobState& job, Result& r) {
  const auto stage = static_cast<FailureStage>(h.failure_stage);
  if (stage != FailureStage::kNone) {
    r = failure(stage, h.error_number, launch_failure_message(stage, h.error_number, job));
  } else {
    r.returncode = WIFSIGNALED(h.wait_status) ? -WTERMSIG(h.wait_status)
                                              : WEXITSTATUS(h.wait_status);
    r.user_time = static_cast<double>(h.user_usec) / 1e6;
    r.system_time = static_cast<double>(h.system_usec) / 1e6;
    r.max_rss_kb = static_cast<long>(h.max_rss_kb);
    r.wall_time = static_cast<double>(h.exited_ns - h.started_ns) / 1e9;
    r.started_ns = h.started_ns;
    r.exited_ns = h.exited_ns;
    r.peak_memory_bytes = h.peak_memory_bytes > 0 ? h.peak_memory_bytes : 0;
    r.memory_source = !(h.flags & protocol::kMemoryFromCgroup) ? MemorySource::kRusage
                      : (h.flags & protocol::kMemorySampled)    ? MemorySource::kCgroupSampled
                                                                 : MemorySource::kCgroup;
    r.oom_killed = (h.flags & protocol::kOomKilled) != 0;
  }
  r.received_ns = h.received_ns;
  r.launch_ns = h.launch_ns;
}

std::vector<std::unique_ptr<SlotChannel>> channels_for(const Segment& segment) {
  const protocol::SegmentHeader& header = segment.header();
  std::vector<std::unique_ptr<SlotChannel>> channels;
  for (std::uint32_t i = 0; i < header.slot_count; ++i)
    channels.push_back(std::make_unique<SlotChannel>(segment.slot(i), header.request_capacity,
                                                     header.output_capacity));
  return channels;
}

std::shared_ptr<HistoryStore> history_for(const PoolOptions& options) {
  if (options.history) return options.history;
  if (options.memory_history_path.empty()) return nullptr;
  return std::make_shared<HistoryStore>(options.memory_history_path, HistoryStoreOptions{},
                                        options.warn);
}

std::unique_ptr<PoolMemory> memory_for(const PoolOptions& options,
                                       const std::shared_ptr<HistoryStore>& history) {
  if (!options.memory_budget.enabled()) return nullptr;
  return std::make_unique<PoolMemory>(options, static_cast<std::uint32_t>(options.slots),
                                      history);
}

std::vector<std::string> spawner_arguments(const PoolMemory* memory, std::size_t slots) {
  std::vector<std::string> arguments;
  if (memory)
    for (std::uint32_t i = 0; i < slots; ++i) arguments.push_back(memory->spawner_argument(i));
  return arguments;
}

std::unique_ptr<SchedulingPolicy> policy_for(PoolMemory* memory) {
  if (memory) return memory->take_policy();
  return std::make_unique<FifoPolicy>();
}

Scheduler::Grants grants_for(const PoolOptions& options) {
  return {options.local_slots, options.jobserver};
}

// A command that never started because the build was interrupted: as if `sig` killed it
// (the driver reports the interruption), not a failure of the pool.
Result interrupted_by(int sig) {
  Result r;
  r.returncode = -sig;
  return r;
}

}  // namespace

PoolCore::PoolCore(const PoolOptions& options)
    : options_(options),
      arg_max_(exec_arg_max()),
      segment_(static_cast<std::uint32_t>(options.slots), arg_max_ + kRequestSlack,
               options.output_chunk_bytes),
      history_(history_for(options)),
      memory_(memory_for(options, history_)),
      progress_(options.progress),
      channels_(channels_for(segment_)),
      supervisor_(options.spawner_path, options.start_timeout, segment_, channels_,
                  spawner_arguments(memory_.get(), options.slots),
                  memory_ ? memory_->cgroups() : nullptr),
      scheduler_(options.slots, policy_for(memory_.get()), 0, grants_for(options)),
      stop_(options.stop_signal_fd),
      same_cpu_handoff_(options.same_cpu_handoff) {
  if (progress_) progress_->set_slots(options.slots, memory_ != nullptr);
  if (progress_ && options.jobserver)
    progress_->set_token_waits(this, [this] { return scheduler_.waiting_for_token(); });
  supervisor_.start();
}

PoolCore::~PoolCore() {
  if (progress_) progress_->clear_token_waits(this);  // before the scheduler goes
  close();
}

std::unique_ptr<JobState> PoolCore::submit(PreparedCommand& prepared, bool blocking) {
  const Command& command = prepared.command;
  auto job = std::make_unique<JobState>();
  job->scheduling.submitted_ns = monotonic_ns();
  if (memory_) job->cancel_alls_at_submit = cancel_alls_.load(std::memory_order_relaxed);
  job->output = command.output;
  job->cwd = command.cwd;
  job->scheduling.local = prepared.local;
  if (scheduler_.wants_keys() || history_ || progress_)
    job->scheduling.key = prepared.key = make_command_key(prepared);
  // The progress sees a blocking submit queued; a try_submit only once it starts.
  if (progress_ && blocking) job->progress_id = progress_->submitted(prepared.key, prepared.line);
  const Scheduler::Dispatch dispatch =
      blocking ? scheduler_.acquire(job->scheduling) : scheduler_.try_acquire(job->scheduling);
  if (progress_ && dispatch.slot >= 0) {
    if (!blocking) job->progress_id = progress_->submitted(prepared.key, prepared.line);
    progress_->started(job->progress_id, job->scheduling.dispatched_ns);
  }
  if (dispatch.closed) {
    job->result = failure(FailureStage::kPoolClosed, ESHUTDOWN, "the pool is closed");
    if (progress_) progress_finished(*job, job->result);
    return job;
  }
  if (dispatch.interrupted) {
    job->result = interrupted_by(dispatch.interrupted);
    add_wait_fields(job->scheduling, job->result);
    if (progress_) progress_finished(*job, job->result);
    return job;
  }
  if (dispatch.slot < 0) return nullptr;
  job->slot = dispatch.slot;
  if (stopped_before_start(*job)) return job;
  SpawnerLoss loss;
  if (!supervisor_.ensure_alive(job->slot, loss)) {
    finish_unsent(*job, failure(loss.stage, error_number_for(loss.stage), loss.description));
    return job;
  }
  if (!command.env) {  // prepare_command() always sets it: a layer lost it
    finish_unsent(*job, failure(FailureStage::kRequest, EINVAL, "the command has no environment"));
    return job;
  }
  const RequestFields fields{&command.argv, &*command.env, &job->cwd,
                             request_flags(command.output), 0};
  SlotChannel& channel = *channels_[job->slot];
  const EncodeError refused = channel.write_request(fields, arg_max_, job->request_number);
  if (refused.error_number) {
    finish_unsent(*job, failure(FailureStage::kRequest, refused.error_number, refused.message));
    return job;
  }
  job->program = command.argv[0];
  hand_over(*job);
  return job;
}

// The request is in the slot: the spawner gets it. Also for an OOM retry's second run.
void PoolCore::hand_over(JobState& job) {
  if (memory_) {
    job.measured_in_use_bytes = memory_->usage_bytes();
    job.oom_kills_at_hand_over = memory_->oom_kills_now();
  }
  // The request half of the same-CPU hand-off (worker_pool/protocol/cpu_affinity.h).
  job.spawner_pinned = same_cpu_handoff_.load(std::memory_order_relaxed) &&
                      supervisor_.pin_to_current_cpu(job.slot);
  channels_[job.slot]->hand_request_over(job.spawner_pinned);
}

// The driver took a stop signal its handler has not acted on yet (PoolOptions::
// stop_signal_fd), or was interrupted after this command's dispatch: this command and
// every queued one do not start.
bool PoolCore::stopped_before_start(JobState& job) {
  int sig = stop_.check();
  if (!sig && options_.stop_signal_fd >= 0 && (sig = spawners_stop_signal())) stop_.note(sig);
  if (!sig) return false;
  scheduler_.interrupt(sig);
  finish_unsent(job, interrupted_by(sig));
  add_wait_fields(job.scheduling, job.result);
  return true;
}

// A stop signal that reached a spawner. The driver's own may not show yet: the kernel
// takes a signal off the pending set for one thread, which can then wait for a CPU
// before its handler writes the wake-up pipe, while the Ctrl-C's other effects (a
// spawner forwarding it, the command ending, its slot and token freed) already
// dispatched this command. The spawners are in the driver's process group, and any
// slot freed by the Ctrl-C was freed by a spawner that noted it first.
int PoolCore::spawners_stop_signal() const {
  for (const auto& channel : channels_)
    if (const int sig = channel->spawner_stop_signal()) return sig;
  return 0;
}

// A job that got a slot but never reached its spawner gives the slot back at once.
void PoolCore::finish_unsent(JobState& job, Result result) {
  scheduler_.release(job.slot, job.scheduling, result);
  job.slot = -1;
  if (progress_) progress_finished(job, result);
  job.result = std::move(result);
}

void PoolCore::progress_finished(JobState& job, const Result& r) {
  if (job.progress_id == 0) return;
  progress_->finished(job.progress_id, !r.started() || r.returncode != 0,
                      r.started() ? r.exited_ns - r.started_ns : 0);
  job.progress_id = 0;
}

Result PoolCore::wait(JobState& job, const WaitTick& tick, std::chrono::milliseconds tick_period) {
  if (job.slot < 0) return std::move(job.result);
  Result r = collect(job, tick, tick_period);
  // The slot's cgroup says the OOM killer struck, whatever the exit status (a compiler
  // driver reports a killed cc1plus as an error exit); without slot cgroups, a failure
  // while the driver's cgroup counted a kill (collect()). Once only: a second kill is
  // the result.
  if (r.oom_killed && memory_) r = run_again_alone(job, std::move(r), tick, tick_period);
  if (job.slot >= 0) scheduler_.release(job.slot, job.scheduling, r);
  job.slot = -1;
  add_wait_fields(job.scheduling, r);
  // The peak only where admission measured it for itself (the cgroup, or with no
  // cgroup ru_maxrss, as admission would); without a budget the duration alone.
  if (history_ && r.started())
    history_->record(job.scheduling.key, memory_ ? r.peak_memory_bytes : 0,
                     r.exited_ns - r.started_ns);
  if (memory_) add_memory_fields(job, r);
  if (progress_) progress_finished(job, r);
  return r;
}

// Issue 12's recovery: the command runs again on its own slot once nothing else runs,
// and nothing else starts until it ends; its prediction is at least the peak it was
// killed at (the policy also learns that peak now; the history gets the run that ends
// it). Its first run's captured output is dropped (passthrough output was shown).
Result PoolCore::run_again_alone(JobState& job, Result killed, const WaitTick& tick,
                                 std::chrono::milliseconds tick_period) {
  // An interrupted build (cancel_all) runs nothing again; the killed run stands.
  const auto interrupted = [&] {
    return cancel_alls_.load(std::memory_order_relaxed) != job.cancel_alls_at_submit;
  };
  if (interrupted()) return killed;
  JobInfo& info = job.scheduling;
  info.peak_floor_bytes = std::max(killed.peak_memory_bytes, info.predicted_peak_bytes);
  const Scheduler::Dispatch again = scheduler_.rerun_alone(job.slot, info, killed);
  if (again.slot < 0) {  // the pool closed meanwhile: the first run's outcome stands
    job.slot = -1;
    return killed;
  }
  if (interrupted()) return killed;  // while it waited; wait() gives the slot back
  SpawnerLoss loss;
  if (!supervisor_.ensure_alive(job.slot, loss)) {
    Result lost = failure(loss.stage, error_number_for(loss.stage), loss.description);
    lost.oom_retries = 1;
    return lost;
  }
  channels_[job.slot]->renumber_request(job.request_number);
  hand_over(job);
  Result r = collect(job, tick, tick_period);
  r.oom_retries = 1;
  return r;
}

// What the admission knew of the job, and the OOM kill's sentence: the command ran, so
// its exit status stays; the message says why it failed.
void PoolCore::add_memory_fields(const JobState& job, Result& r) const {
  const JobInfo& info = job.scheduling;
  r.predicted_peak_bytes = info.predicted_peak_bytes;
  r.predicted_in_use_bytes = info.predicted_in_use_bytes;
  r.measured_in_use_bytes = job.measured_in_use_bytes;
  if (r.oom_killed) r.error_message = PoolMemory::oom_message(r.peak_memory_bytes, info.budget_bytes);
}

void PoolCore::add_wait_fields(const JobInfo& info, Result& r) {
  r.slot_wait_ns = info.slot_wait_ns;
  r.memory_wait_ns = info.admission_wait_ns;
  r.local_slot_wait_ns = info.local_slot_wait_ns;
  r.jobserver_wait_ns = info.jobserver_wait_ns;
}

Result PoolCore::collect(JobState& job, const WaitTick& tick,
                         std::chrono::milliseconds tick_period) {
  Result r;
  r.captured = job.output != OutputMode::kPassthrough;
  // The tick may ask to signal the command. One pointer captured: the std::function
  // keeps it inline, no allocation per command.
  struct TickCancel {
    PoolCore* core;
    const JobState* job;
    const WaitTick* tick;
  } tick_cancel{this, &job, &tick};
  std::function<void()> on_long_wait;
  if (tick)
    on_long_wait = [context = &tick_cancel] {
      if (const int sig = (*context->tick)()) context->core->cancel(*context->job, sig);
    };
  const SlotChannel::Reply reply = channels_[job.slot]->collect(
      r.stdout_data, r.stderr_data, job.spawner_pinned,
      tick ? static_cast<int>(tick_period.count()) : 1000, on_long_wait);
  check_cpu_give_backs(job.slot, reply);
  switch (reply.status) {
    case SlotChannel::Reply::Status::kComplete:
      take_reply(reply.header, job, r);
      if (memory_) memory_->recognise_oom_kill(job.oom_kills_at_hand_over, r);
      break;
    case SlotChannel::Reply::Status::kSpawnerDead: {
      const SpawnerLoss loss = supervisor_.loss(job.slot);
      r = failure(loss.stage, error_number_for(loss.stage),
                  loss.description + " while running '" + job.program + "'");
      break;
    }
    case SlotChannel::Reply::Status::kMalformed:
      // A spawner that breaks the protocol cannot be trusted with another command.
      supervisor_.replace_broken(job.slot);
      r = failure(FailureStage::kSpawner, EPROTO,
                  "malformed reply from the spawner (" + reply.why + ") for '" + job.program +
                      "'");
      break;
  }
  r.slot = job.slot;
  r.submitted_ns = job.scheduling.submitted_ns;
  r.dispatched_ns = job.scheduling.dispatched_ns;
  r.completed_ns = monotonic_ns();
  return r;
}

// The give-backs that end a same-CPU hand-off (worker_pool/protocol/cpu_affinity.h): a
// refused set was widened (every CPU of the cpuset) or, refused that too, may have left
// a thread on one CPU: the spawner's pin is then undone from here, and no more pins are
// made. Said once per pool: it repeats for every command otherwise.
void PoolCore::check_cpu_give_backs(int slot, const SlotChannel::Reply& reply) {
  using How = CpuGiveBack::How;
  const std::uint32_t flags =
      reply.status == SlotChannel::Reply::Status::kComplete ? reply.header.flags : 0;
  std::vector<std::string> said;
  bool stuck = false;
  const auto why = [](int error_number) {
    return error_number ? std::string(" (") + std::strerror(error_number) + ")" : std::string();
  };
  const CpuGiveBack& waiter = reply.waiter_cpus;
  if (waiter.how == How::kWidened)
    said.push_back("a driver thread was refused its own CPU set" + why(waiter.error_number) +
                   ": it has every CPU its cpuset allows instead");
  if (waiter.how == How::kFailed) {
    said.push_back("a driver thread could not get its CPU set back" +
                   why(waiter.error_number) + ": it may stay on one CPU");
    stuck = true;
  }
  if (flags & protocol::kCpusNotGivenBack) {
    const CpuGiveBack undone = supervisor_.give_cpus_back(slot);
    said.push_back(std::string("a spawner or its command could not get its CPU set back") +
                   (undone.how == How::kRestored ? ": the driver gave the spawner its own"
                    : undone.how == How::kWidened
                        ? ": the driver gave the spawner every CPU its cpuset allows"
                        : ", nor could the driver" + why(undone.error_number) +
                              ": it may stay on one CPU"));
    stuck = true;  // pinned again, it would be stuck again
  } else if (flags & protocol::kCpusWidened) {
    said.push_back("a spawner was refused its own CPU set: it has every CPU its cpuset "
                   "allows instead");
  }
  if (said.empty()) return;
  if (stuck) same_cpu_handoff_.store(false, std::memory_order_relaxed);
  if (cpu_warned_.exchange(true) || !options_.warn) return;
  std::string message = "same-CPU hand-off: ";
  for (std::size_t i = 0; i < said.size(); ++i) message += (i ? "; " : "") + said[i];
  options_.warn(message + (stuck ? "; the hand-off hint is off for this pool" : ""));
}

void PoolCore::cancel(const JobState& job, int sig) {
  if (job.slot >= 0) supervisor_.signal_command(job.slot, job.request_number, sig);
}

void PoolCore::cancel_all(int sig) {
  cancel_alls_.fetch_add(1, std::memory_order_relaxed);
  for (std::size_t i = 0; i < channels_.size(); ++i)
    if (const auto request = channels_[i]->request_in_flight())
      supervisor_.signal_command(static_cast<int>(i), *request, sig);
}

// The scheduler first: nothing new starts while the spawners go; the cgroups last, once
// nothing runs in them.
void PoolCore::close() {
  scheduler_.close();
  supervisor_.close();
  if (memory_) memory_->close();
  if (history_) history_->flush();
}

}  // namespace spawnpool::detail
