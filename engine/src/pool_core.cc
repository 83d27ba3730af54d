#include "pool_core.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>

#include "worker_pool/protocol/cpu_affinity.h"
#include "worker_pool/protocol/futex.h"
#include "worker_pool/protocol/monotonic_clock.h"
#include "worker_pool/protocol/reply_codec.h"
#include "worker_pool/protocol/request_codec.h"

extern char** environ;

namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kRequestSlack = PATH_MAX + 4096;

Result failure(FailureStage stage, int error_number, std::string message) {
  Result r;
  r.failure = stage;
  r.error_number = error_number;
  r.error_message = std::move(message);
  return r;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

pid_t current_thread_id() {
  thread_local const pid_t tid = gettid();
  return tid;
}

std::string current_directory() {
  char buffer[PATH_MAX];
  return getcwd(buffer, sizeof buffer) ? buffer : "";
}

// The spawner's own cwd is the driver's at pool start: a relative cwd is resolved here,
// against the driver's cwd at submit time, as Popen would.
std::string working_directory(const std::string& cwd) {
  if (cwd.empty()) return current_directory();
  if (cwd[0] == '/') return cwd;
  const std::string here = current_directory();
  return here.empty() ? cwd : here + "/" + cwd;
}

std::uint32_t request_flags(OutputMode output) {
  switch (output) {
    case OutputMode::kPassthrough: return 0;
    case OutputMode::kCapture: return protocol::kCaptureOutput;
    case OutputMode::kCaptureMerged: return protocol::kCaptureOutput | protocol::kMergeStderr;
  }
  return 0;
}

std::string launch_failure_message(FailureStage stage, int error_number,
                                   const std::string& program, const std::string& cwd) {
  const std::string reason = std::strerror(error_number);
  if (stage == FailureStage::kChdir)
    return "cannot enter working directory '" + cwd + "' for '" + program + "': " + reason;
  return "cannot execute '" + program + "': " + reason;
}

void set_run_outcome(Result& r, const protocol::ReplyHeader& h) {
  r.returncode = WIFSIGNALED(h.wait_status) ? -WTERMSIG(h.wait_status)
                                            : WEXITSTATUS(h.wait_status);
  r.user_time = static_cast<double>(h.user_usec) / 1e6;
  r.system_time = static_cast<double>(h.system_usec) / 1e6;
  r.max_rss_kb = static_cast<long>(h.max_rss_kb);
  r.wall_time = static_cast<double>(h.exited_ns - h.started_ns) / 1e9;
  r.started_ns = h.started_ns;
  r.exited_ns = h.exited_ns;
}

}  // namespace

PoolCore::PoolCore(const PoolOptions& options)
    : options_(options),
      // What execve() accepts in all: sysconf follows RLIMIT_STACK / 4.
      arg_max_(static_cast<std::uint64_t>(sysconf(_SC_ARG_MAX))),
      segment_(static_cast<std::uint32_t>(options.slots), arg_max_ + kRequestSlack,
               options.output_chunk_bytes) {
  init_spawners();
}

int PoolCore::acquire_slot(bool blocking, std::string& error) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (blocking) slot_freed_.wait(lock, [&] { return closed_ || !free_slots_.empty(); });
  if (closed_) {
    error = "the pool is closed";
    return -1;
  }
  if (free_slots_.empty()) return -1;
  // Last freed first: its spawner's pages and caches are the warmest.
  const int index = free_slots_.back();
  free_slots_.pop_back();
  return index;
}

void PoolCore::release_slot(int index) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    free_slots_.push_back(index);
  }
  slot_freed_.notify_one();
}

bool PoolCore::submit(const Command& command, bool blocking, Job& job) {
  const std::int64_t submitted_ns = monotonic_ns();
  job.pending_ = true;
  std::string error;
  const int index = acquire_slot(blocking, error);
  if (index < 0) {
    if (error.empty()) return (job.pending_ = false);
    job.result_ = failure(FailureStage::kSpawner, ESHUTDOWN, error);
    return true;
  }
  Slot& slot = *slots_[index];
  slot.dispatched_ns = monotonic_ns();
  if (slot.dead.load() && !ensure_spawner(slot, error)) {
    release_slot(index);
    job.result_ = failure(FailureStage::kSpawner, ECHILD, error);
    return true;
  }
  const std::vector<std::string> inherited_env =
      command.env ? std::vector<std::string>{} : current_environment();
  slot.cwd = working_directory(command.cwd);
  const RequestFields fields{&command.argv, command.env ? &*command.env : &inherited_env,
                             &slot.cwd, request_flags(command.output),
                             slot.request_number + 1};
  EncodeError refused = encode_request(fields, arg_max_, segment_.header().request_capacity,
                                       slot.view.request, slot.view.request_payload);
  if (refused.error_number) {
    release_slot(index);
    job.result_ = failure(FailureStage::kRequest, refused.error_number, refused.message);
    return true;
  }
  slot.output = command.output;
  slot.submitted_ns = submitted_ns;
  slot.program = command.argv[0];
  {
    // Under mutex_, as cancel() reads them: a cancel from now on names this request.
    std::lock_guard<std::mutex> lock(mutex_);
    ++slot.request_number;
    // The request half of the same-CPU hand-off (worker_pool/protocol/cpu_affinity.h). Under
    // mutex_ too: the monitor reaps a dead spawner under it, so the pid is still ours.
    slot.same_cpu_handoff =
        options_.same_cpu_handoff && !slot.dead.load() &&
        pin_task_to_current_cpu(slot.spawner.pid, slot.view.control->spawner_cpus.load());
    if (slot.same_cpu_handoff) slot.view.request->flags |= protocol::kSameCpuHandoff;
    slot.view.control->state.store(protocol::kRequest, std::memory_order_seq_cst);
  }
  futex_wake_all(slot.view.control->state);
  job.core_ = shared_from_this();
  job.slot_ = index;
  return true;
}

// Sleeps until the spawner hands the turn back or is found dead. The dead flag is read
// after the state, and the monitor sets it before reading the state (both seq_cst), so
// one of the two always sees the other: no lost wake-up when a spawner dies.
std::uint32_t PoolCore::await_driver_turn(int index, const WaitTick& tick,
                                          std::chrono::milliseconds tick_period) {
  Slot& slot = *slots_[index];
  const int timeout_ms = tick ? static_cast<int>(tick_period.count()) : 1000;
  for (;;) {
    const std::uint32_t state = slot.view.control->state.load(std::memory_order_seq_cst);
    if (!protocol::is_spawner_turn(state)) return state;
    if (slot.dead.load(std::memory_order_seq_cst)) return protocol::kSpawnerDead;
    futex_wait(slot.view.control->state, state, timeout_ms);
    // The tick is for long waits (a timeout, or a signal interrupting the sleep): a
    // reply that has arrived returns at once, without the tick's GIL round trip.
    if (tick && protocol::is_spawner_turn(slot.view.control->state.load(std::memory_order_seq_cst)))
      if (const int sig = tick()) cancel(index, sig);
  }
}

Result PoolCore::wait(Job& job, const WaitTick& tick, std::chrono::milliseconds tick_period) {
  job.pending_ = false;
  if (job.slot_ < 0) return std::move(job.result_);
  const int index = job.slot_;
  job.slot_ = -1;
  Result r = collect(index, tick, tick_period);
  release_slot(index);
  job.core_.reset();
  return r;
}

// Loop structure: each round waits for the spawner's turn to end, checks and places the
// chunk, and asks for the next one until the whole output has arrived.
Result PoolCore::collect(int index, const WaitTick& tick, std::chrono::milliseconds tick_period) {
  Slot& slot = *slots_[index];
  Result r;
  r.captured = slot.output != OutputMode::kPassthrough;
  std::uint64_t received = 0;
  // The reply half of the same-CPU hand-off: while this thread may sleep for the first
  // chunk, the spawner may pin it to its own CPU; the thread's own set is put back next.
  CpuSet own_cpus;
  if (slot.same_cpu_handoff) {
    own_cpus = CpuSet::of_calling_thread();
    if (!own_cpus.empty()) {
      slot.view.control->waiter_cpus.store(own_cpus.first_64_cpus(), std::memory_order_seq_cst);
      slot.view.control->waiter_tid.store(current_thread_id(), std::memory_order_seq_cst);
    }
  }
  for (;;) {
    const std::uint32_t turn = await_driver_turn(index, tick, tick_period);
    if (!own_cpus.empty()) {
      slot.view.control->waiter_tid.store(0, std::memory_order_seq_cst);
      // A spawner that died may have pinned us before it could say so.
      if (turn == protocol::kSpawnerDead || (slot.view.reply->flags & protocol::kWaiterPinned))
        own_cpus.apply_to_calling_thread();
      own_cpus = CpuSet();
    }
    if (turn == protocol::kSpawnerDead) {
      std::lock_guard<std::mutex> lock(mutex_);
      r = failure(FailureStage::kSpawner, ECHILD,
                  slot.death + " while running '" + slot.program + "'");
      break;
    }
    const protocol::ReplyHeader header = *slot.view.reply;
    std::string why;
    if (!reply_chunk_is_valid(header, segment_.header().output_capacity, received, why)) {
      fail_slot_protocol(index);
      r = failure(FailureStage::kSpawner, EPROTO,
                  "malformed reply from the spawner (" + why + ") for '" + slot.program + "'");
      break;
    }
    if (received == 0) {
      r.stdout_data.reserve(reply_reserve_bytes(header.stdout_size));
      r.stderr_data.reserve(reply_reserve_bytes(header.stderr_size));
    }
    place_reply_chunk(header, slot.view.output, r.stdout_data, r.stderr_data);
    received += header.chunk_size;
    if (received < header.stdout_size + header.stderr_size) {
      slot.view.control->state.store(protocol::kNextChunk, std::memory_order_seq_cst);
      futex_wake_all(slot.view.control->state);
      continue;
    }
    slot.view.control->state.store(protocol::kIdle, std::memory_order_release);
    const auto stage = static_cast<FailureStage>(header.failure_stage);
    if (stage != FailureStage::kNone) {
      r = failure(stage, header.error_number,
                  launch_failure_message(stage, header.error_number, slot.program, slot.cwd));
    } else {
      set_run_outcome(r, header);
    }
    break;
  }
  r.slot = index;
  r.submitted_ns = slot.submitted_ns;
  r.dispatched_ns = slot.dispatched_ns;
  r.completed_ns = monotonic_ns();
  return r;
}

// A spawner that breaks the protocol cannot be trusted with another command: kill it
// and wait until the monitor has replaced its record, so the slot comes back clean.
void PoolCore::fail_slot_protocol(int index) {
  Slot& slot = *slots_[index];
  std::unique_lock<std::mutex> lock(mutex_);
  if (slot.spawner.pid > 0) kill(slot.spawner.pid, SIGKILL);
  spawner_changed_.wait(lock, [&] { return slot.dead.load() || stop_monitor_; });
}

// While the spawner holds the request: the command runs or is about to. The cancel names
// the request, so it reaches this command even if it starts later, and never the next.
bool PoolCore::command_in_flight(const Slot& slot) const {
  return !slot.dead.load() && slot.view.control->state.load() == protocol::kRequest;
}

void PoolCore::cancel(int index, int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  Slot& slot = *slots_[index];
  if (command_in_flight(slot)) signal_spawner_command(slot.spawner, slot.request_number, sig);
}

void PoolCore::cancel_all(int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& slot : slots_)
    if (command_in_flight(*slot))
      signal_spawner_command(slot->spawner, slot->request_number, sig);
}

std::vector<int> PoolCore::spawner_pids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> pids;
  for (const auto& slot : slots_)
    if (!slot->dead.load()) pids.push_back(slot->spawner.pid);
  return pids;
}

}  // namespace spawnpool::detail
