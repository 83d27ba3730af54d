#include "worker_pool/spawner/slot_server.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "worker_pool/spawner/command_launcher.h"
#include "worker_pool/spawner/descendants.h"
#include "worker_pool/protocol/futex.h"

namespace spawnpool::detail {
namespace {


std::int64_t usec(const timeval& tv) { return tv.tv_sec * 1000000LL + tv.tv_usec; }

// Output buffers grown by one huge command are given back rather than kept for life.
void release_if_large(std::string& buffer) {
  constexpr std::size_t kKeep = 1 << 20;
  if (buffer.capacity() > kKeep) std::string().swap(buffer);
  buffer.clear();
}

}  // namespace

SlotServer::SlotServer(protocol::SlotView slot, const protocol::SegmentHeader& header,
                       RunningChild& running, SlotCgroup& slot_cgroup, bool close_extra_fds)
    : slot_(slot),
      request_capacity_(header.request_capacity),
      output_capacity_(header.output_capacity),
      running_(running),
      slot_cgroup_(slot_cgroup),
      close_extra_fds_(close_extra_fds),
      launch_cpus_(CpuSet::of_calling_thread()),
      every_cpu_(launch_cpus_.every_cpu()) {}

void SlotServer::hand_over(std::uint32_t state) {
  slot_.control->state.store(state, std::memory_order_release);
  futex_wake_all(slot_.control->state);
}

std::uint32_t SlotServer::wait_for_turn() {
  for (;;) {
    const std::uint32_t state = slot_.control->state.load(std::memory_order_acquire);
    if (state == protocol::kRequest || state == protocol::kNextChunk) return state;
    futex_wait(slot_.control->state, state, -1);
  }
}

void SlotServer::serve() {
  slot_.control->child_pid.store(0);
  hand_over(protocol::kIdle);
  for (;;) {
    // A stray kNextChunk (no transfer in progress) is answered as a finished reply.
    if (wait_for_turn() == protocol::kRequest)
      serve_one();
    else
      hand_over(protocol::kReply);
  }
}

void SlotServer::reply_failure(FailureStage stage, int error_number, std::int64_t launch_ns) {
  protocol::ReplyHeader header{};
  header.failure_stage = static_cast<std::int32_t>(stage);
  header.error_number = error_number;
  header.received_ns = received_ns_;
  header.launch_ns = launch_ns;
  header.started_ns = header.exited_ns = monotonic_ns();
  header.flags = cpu_flags_;
  send_reply(header);
}

void SlotServer::serve_one() {
  received_ns_ = monotonic_ns();
  // With the driver's one-CPU pin, the command starts on this CPU too and gets the whole
  // set back just before exec (child_start.h says why); this process gets it back right
  // after the launch, and before any failure reply. Still pinned from an earlier refusal,
  // it does the same: the command must not inherit the one CPU.
  same_cpu_handoff_ = slot_.request->flags & protocol::kSameCpuHandoff;
  cpu_flags_ = 0;
  std::string why;
  if (!decode_request(*slot_.request, slot_.request_payload, request_capacity_, request_,
                      why)) {
    give_back_launch_cpus();
    return reply_failure(FailureStage::kRequest, EINVAL, 0);
  }

  // Under the RunningChild lock: were the driver to go during the launch, the watch
  // thread would otherwise find no command to kill and leave it orphaned.
  LaunchedCommand command;
  // The command's cgroup, or the slot's peak from here (nothing when not open).
  slot_cgroup_.begin_command();
  const bool driver_alive = running_.launch(request_.number, [&] {
    command = launch_command(request_, close_extra_fds_,
                             may_be_pinned() ? &launch_cpus_ : nullptr, &every_cpu_,
                             slot_cgroup_.procs_fd(), slot_cgroup_.command_cgroup_fd());
    return command.pid;
  });
  give_back_launch_cpus();
  if (!driver_alive)
    for (;;) pause();  // the driver is gone and the watch thread is ending the process
  if (command.cpu_set_error) cpu_flags_ |= protocol::kCpusNotGivenBack;
  if (command.pid < 0)
    return reply_failure(command.failure, command.error_number, command.launch_ns);
  started_ns_ = monotonic_ns();
  slot_.control->child_pid.store(command.pid, std::memory_order_release);
  const bool reaped = wait_for_command(command, running_, outcome_,
                                       slot_cgroup_.samples_memory() ? &slot_cgroup_ : nullptr);
  slot_.control->child_pid.store(0, std::memory_order_release);
  // As their subreaper, we inherit what earlier commands left; those that ended are
  // reaped here, where no command of ours runs (after a failed reap too).
  if (running_.reaches_descendants()) reap_exited_children();
  if (!reaped) {
    // A failed reap is the spawner's failure, with its errno: no exit status exists.
    slot_cgroup_.end_command(command.joined_cgroup);
    release_if_large(outcome_.stdout_data);
    release_if_large(outcome_.stderr_data);
    return reply_failure(FailureStage::kSpawner, outcome_.reap_error, command.launch_ns);
  }

  protocol::ReplyHeader header{};
  header.flags = cpu_flags_;
  header.wait_status = outcome_.wait_status;
  header.user_usec = usec(outcome_.usage.ru_utime);
  header.system_usec = usec(outcome_.usage.ru_stime);
  header.max_rss_kb = outcome_.usage.ru_maxrss;
  const CommandMemory memory = slot_cgroup_.end_command(command.joined_cgroup);
  bool from_cgroup = false;
  header.peak_memory_bytes = reported_peak_bytes(memory, outcome_.usage.ru_maxrss, from_cgroup);
  if (from_cgroup) header.flags |= protocol::kMemoryFromCgroup;
  if (from_cgroup && memory.sampled) header.flags |= protocol::kMemorySampled;
  if (memory.oom_killed) header.flags |= protocol::kOomKilled;
  header.received_ns = received_ns_;
  header.launch_ns = command.launch_ns;
  header.started_ns = started_ns_;
  header.exited_ns = outcome_.exited_ns;
  header.stdout_size = outcome_.stdout_data.size();
  header.stderr_size = outcome_.stderr_data.size();
  send_reply(header);
  release_if_large(outcome_.stdout_data);
  release_if_large(outcome_.stderr_data);
}

// Checked: a refused set is widened, and what could not be given back is said in the
// reply (the driver reports it once; this process's stderr would say it per spawner).
void SlotServer::give_back_launch_cpus() {
  if (!may_be_pinned()) return;
  // Put back from outside by the driver since (it saw kCpusNotGivenBack): nothing to do.
  if (!same_cpu_handoff_ && CpuSet::of_calling_thread() == launch_cpus_) {
    still_pinned_ = false;
    return;
  }
  const CpuGiveBack given = give_back_cpus(launch_cpus_);
  still_pinned_ = given.how == CpuGiveBack::How::kFailed;
  if (given.how == CpuGiveBack::How::kWidened) cpu_flags_ |= protocol::kCpusWidened;
  if (still_pinned_) cpu_flags_ |= protocol::kCpusNotGivenBack;
}

// The reply half of the same-CPU hand-off: the driver thread that waits for this reply
// is pinned to this CPU, where it can run as soon as this spawner sleeps.
bool SlotServer::pin_waiter() const {
  return pin_task_to_current_cpu(slot_.control->waiter_tid.load());
}

// Output travels as stdout followed by stderr, cut into chunks of output_capacity_.
// Loop structure: write a chunk, hand the turn to the driver, and wait until it asks
// for the next chunk; the last chunk ends the exchange.
void SlotServer::send_reply(protocol::ReplyHeader header) {
  const std::string& out = outcome_.stdout_data;
  const std::string& err = outcome_.stderr_data;
  const std::uint64_t total = header.stdout_size + header.stderr_size;
  std::uint64_t offset = 0;
  for (;;) {
    const std::uint64_t size = std::min(output_capacity_, total - offset);
    for (std::uint64_t copied = 0; copied < size;) {
      const std::uint64_t at = offset + copied;
      const bool in_out = at < out.size();
      const char* src = in_out ? out.data() + at : err.data() + (at - out.size());
      const std::uint64_t n =
          std::min(size - copied, in_out ? out.size() - at : total - at);
      std::memcpy(slot_.output + copied, src, n);
      copied += n;
    }
    header.chunk_offset = offset;
    header.chunk_size = size;
    // OR-ed: the memory flags are set already; only the first chunk may pin.
    const bool pinned = offset == 0 && same_cpu_handoff_ && pin_waiter();
    header.flags = (header.flags & ~std::uint32_t{protocol::kWaiterPinned}) |
                   (pinned ? std::uint32_t{protocol::kWaiterPinned} : 0u);
    header.replied_ns = monotonic_ns();
    *slot_.reply = header;
    hand_over(protocol::kReply);
    offset += size;
    if (offset == total) return;
    if (wait_for_turn() != protocol::kNextChunk) return;  // the driver moved on
  }
}

}  // namespace spawnpool::detail
