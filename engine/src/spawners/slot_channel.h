// One slot's protocol exchange, driver side: the request written and handed over, the
// turn awaited, the reply's chunks checked and gathered, the reply half of the same-CPU
// hand-off (worker_pool/protocol/cpu_affinity.h). Passive: no thread or lock of its own.
// Threading: the job holding the slot (its submitter, then its waiter) makes the
// exchange calls; the supervisor makes the lifetime calls under its own lock; the words
// both read are atomics, ordered as await_turn() explains.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "worker_pool/protocol/cpu_affinity.h"
#include "worker_pool/protocol/protocol.h"
#include "worker_pool/protocol/request_codec.h"

namespace spawnpool::detail {

class SlotChannel {
 public:
  SlotChannel(protocol::SlotView view, std::uint64_t request_capacity,
              std::uint64_t output_capacity);
  SlotChannel(const SlotChannel&) = delete;
  SlotChannel& operator=(const SlotChannel&) = delete;

  // --- the spawner's lifetime (SpawnerSupervisor) ---------------------------------------
  /// Before a spawner is launched for this slot: state kStarting, no command, alive.
  void reset_for_start();
  /// Waits up to `timeout_ms` for the spawner to attach; true once it has.
  bool wait_for_attach(int timeout_ms);
  /// The spawner is gone: a waiter whose turn it is not gets kSpawnerDead and is woken.
  void mark_spawner_dead();
  bool spawner_dead() const { return spawner_dead_.load(std::memory_order_seq_cst); }
  /// The spawner's running command (its process group leader), 0 if none.
  pid_t command_pid() const { return view_.control->child_pid.load(); }
  /// The stop signal this slot's spawner took (SlotControl::stop_signal), or 0.
  int spawner_stop_signal() const {
    return view_.control->stop_signal.load(std::memory_order_acquire);
  }

  // --- the exchange (the job holding the slot) ------------------------------------------
  /// Encodes `fields` as the slot's next request (its number is the channel's to give:
  /// fields.number is ignored, `number` receives it). Nothing is written on error.
  EncodeError write_request(RequestFields fields, std::uint64_t arg_max, std::uint32_t& number);
  /// The request written last, again, under the next number (an OOM retry on the same
  /// slot: nothing wrote the request area since, and the number names the new run in a
  /// cancel). Hand it over with hand_request_over().
  void renumber_request(std::uint32_t& number);
  /// Hands the written request to the spawner. `spawner_pinned`: the spawner was pinned
  /// to this thread's CPU (the request half of the hand-off); it is told so.
  void hand_request_over(bool spawner_pinned);
  /// The number of the request the spawner holds now, if it holds one (for cancel_all).
  std::optional<std::uint32_t> request_in_flight() const;

  /// How an exchange ended.
  struct Reply {
    enum class Status { kComplete, kSpawnerDead, kMalformed };
    Status status = Status::kComplete;
    protocol::ReplyHeader header{};  // kComplete: the last chunk's header
    std::string why;                 // kMalformed: which check failed
    // The reply half's give-back of this thread's CPU set (anything but kRestored is the
    // caller's to report). kRestored also when nothing was pinned.
    CpuGiveBack waiter_cpus;
  };
  /// Gathers the reply to the request handed over, appending its output to `out` and
  /// `err`, and gives the turn back (kIdle) once complete. `waiter_may_be_pinned`: the
  /// request went with the hint, so the spawner may pin this thread for the reply's
  /// wake-up; its own CPU set is put back first thing (Reply::waiter_cpus says how).
  /// `on_long_wait`, if set, runs after each `wait_ms` without the turn (or a signal
  /// interrupting the sleep).
  Reply collect(std::string& out, std::string& err, bool waiter_may_be_pinned, int wait_ms,
                const std::function<void()>& on_long_wait);

 private:
  std::uint32_t await_turn(int wait_ms, const std::function<void()>& on_long_wait);
  void hand_over(std::uint32_t state);

  protocol::SlotView view_;
  std::uint64_t request_capacity_;
  std::uint64_t output_capacity_;
  std::atomic<bool> spawner_dead_{true};  // until a spawner was launched (reset_for_start)
  std::atomic<std::uint32_t> request_number_{0};  // of the last request written (wraps)
};

}  // namespace spawnpool::detail
