#include "engine/src/spawners/slot_channel.h"

#include <unistd.h>

#include "worker_pool/protocol/cpu_affinity.h"
#include "worker_pool/protocol/futex.h"
#include "worker_pool/protocol/reply_codec.h"

namespace spawnpool::detail {
namespace {

pid_t current_thread_id() {
  thread_local const pid_t tid = gettid();
  return tid;
}

}  // namespace

SlotChannel::SlotChannel(protocol::SlotView view, std::uint64_t request_capacity,
                         std::uint64_t output_capacity)
    : view_(view), request_capacity_(request_capacity), output_capacity_(output_capacity) {}

void SlotChannel::reset_for_start() {
  view_.control->state.store(protocol::kStarting);
  view_.control->child_pid.store(0);
  spawner_dead_.store(false);
}

bool SlotChannel::wait_for_attach(int timeout_ms) {
  if (view_.control->state.load() != protocol::kStarting) return true;
  futex_wait(view_.control->state, protocol::kStarting, timeout_ms);
  return view_.control->state.load() != protocol::kStarting;
}

// The dead flag first, then the state (both seq_cst): see await_turn(). A waiter whose
// turn it is not is woken with kSpawnerDead.
void SlotChannel::mark_spawner_dead() {
  spawner_dead_.store(true, std::memory_order_seq_cst);
  auto& state = view_.control->state;
  std::uint32_t seen = state.load(std::memory_order_seq_cst);
  while (protocol::is_spawner_turn(seen) &&
         !state.compare_exchange_weak(seen, protocol::kSpawnerDead)) {
  }
  futex_wake_all(state);
}

EncodeError SlotChannel::write_request(RequestFields fields, std::uint64_t arg_max,
                                       std::uint32_t& number) {
  fields.number = request_number_.load(std::memory_order_relaxed) + 1;
  EncodeError refused =
      encode_request(fields, arg_max, request_capacity_, view_.request, view_.request_payload);
  if (refused.error_number == 0) {
    number = fields.number;
    // Before the request is handed over: whoever sees kRequest sees this number.
    request_number_.store(fields.number, std::memory_order_seq_cst);
  }
  return refused;
}

void SlotChannel::renumber_request(std::uint32_t& number) {
  number = request_number_.load(std::memory_order_relaxed) + 1;
  view_.request->number = number;
  request_number_.store(number, std::memory_order_seq_cst);
}

void SlotChannel::hand_request_over(bool spawner_pinned) {
  // Set or cleared: a request handed over again keeps its flags from the first time.
  if (spawner_pinned)
    view_.request->flags |= protocol::kSameCpuHandoff;
  else
    view_.request->flags &= ~std::uint32_t{protocol::kSameCpuHandoff};
  hand_over(protocol::kRequest);
}

void SlotChannel::hand_over(std::uint32_t state) {
  view_.control->state.store(state, std::memory_order_seq_cst);
  futex_wake_all(view_.control->state);
}

std::optional<std::uint32_t> SlotChannel::request_in_flight() const {
  if (spawner_dead() || view_.control->state.load() != protocol::kRequest) return std::nullopt;
  return request_number_.load(std::memory_order_seq_cst);
}

// Sleeps until the spawner hands the turn back or is found dead. The dead flag is read
// after the state, and mark_spawner_dead() sets it before reading the state (both
// seq_cst), so one of the two always sees the other: no lost wake-up when a spawner dies.
std::uint32_t SlotChannel::await_turn(int wait_ms, const std::function<void()>& on_long_wait) {
  auto& state_word = view_.control->state;
  for (;;) {
    const std::uint32_t state = state_word.load(std::memory_order_seq_cst);
    if (!protocol::is_spawner_turn(state)) return state;
    if (spawner_dead()) return protocol::kSpawnerDead;
    futex_wait(state_word, state, wait_ms);
    // For long waits only (a timeout, or a signal interrupting the sleep): a reply that
    // has arrived returns at once, without the caller's round trip (the Python GIL).
    if (on_long_wait && protocol::is_spawner_turn(state_word.load(std::memory_order_seq_cst)))
      on_long_wait();
  }
}

// Loop structure: each round waits for the spawner's turn to end, checks and places the
// chunk, and asks for the next one until the whole output has arrived.
SlotChannel::Reply SlotChannel::collect(std::string& out, std::string& err,
                                        bool waiter_may_be_pinned, int wait_ms,
                                        const std::function<void()>& on_long_wait) {
  Reply reply;
  std::uint64_t received = 0;
  // The reply half of the same-CPU hand-off: while this thread may sleep for the first
  // chunk, the spawner may pin it to its own CPU; the thread's own set is put back next.
  CpuSet own_cpus;
  if (waiter_may_be_pinned) {
    own_cpus = CpuSet::of_calling_thread();
    if (!own_cpus.empty())
      view_.control->waiter_tid.store(current_thread_id(), std::memory_order_seq_cst);
  }
  for (;;) {
    const std::uint32_t turn = await_turn(wait_ms, on_long_wait);
    if (!own_cpus.empty()) {
      view_.control->waiter_tid.store(0, std::memory_order_seq_cst);
      // A spawner that died may have pinned us before it could say so.
      if (turn == protocol::kSpawnerDead || (view_.reply->flags & protocol::kWaiterPinned))
        reply.waiter_cpus = give_back_cpus(own_cpus);
      own_cpus = CpuSet();
    }
    if (turn == protocol::kSpawnerDead) {
      reply.status = Reply::Status::kSpawnerDead;
      return reply;
    }
    const protocol::ReplyHeader header = *view_.reply;
    if (!reply_chunk_is_valid(header, output_capacity_, received, reply.why)) {
      reply.status = Reply::Status::kMalformed;
      return reply;
    }
    if (received == 0) {
      out.reserve(reply_reserve_bytes(header.stdout_size));
      err.reserve(reply_reserve_bytes(header.stderr_size));
    }
    place_reply_chunk(header, view_.output, out, err);
    received += header.chunk_size;
    if (received < header.stdout_size + header.stderr_size) {
      hand_over(protocol::kNextChunk);
      continue;
    }
    view_.control->state.store(protocol::kIdle, std::memory_order_release);
    reply.header = header;
    return reply;
  }
}

}  // namespace spawnpool::detail
