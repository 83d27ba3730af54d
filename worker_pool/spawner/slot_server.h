// The spawner's main loop over its slot: wait for a request, run the command (in a
// cgroup of its own below the slot's, or in the slot's, when it has one, measuring its
// peak), hand back the reply (in chunks
// when the output exceeds one chunk). Main thread of the spawner.
#pragma once

#include <cstdint>

#include "worker_pool/cgroup/cgroup_slot.h"
#include "worker_pool/spawner/command_waiter.h"
#include "worker_pool/protocol/cpu_affinity.h"
#include "worker_pool/protocol/protocol.h"
#include "worker_pool/protocol/request_codec.h"
#include "worker_pool/spawner/running_child.h"

namespace spawnpool::detail {

class SlotServer {
 public:
  /// `slot_cgroup` (open or not) must outlive the server; only this thread measures
  /// through it.
  SlotServer(protocol::SlotView slot, const protocol::SegmentHeader& header,
             RunningChild& running, SlotCgroup& slot_cgroup, bool close_extra_fds);

  /// Announces the spawner as attached, then serves requests until the process ends.
  [[noreturn]] void serve();

 private:
  std::uint32_t wait_for_turn();
  void serve_one();
  void reply_failure(FailureStage stage, int error_number, std::int64_t launch_ns);
  // Hands the reply over; returns early if the driver sends a new request instead of
  // asking for the next chunk.
  void send_reply(protocol::ReplyHeader header);
  bool pin_waiter() const;
  void give_back_launch_cpus();
  bool may_be_pinned() const { return same_cpu_handoff_ || still_pinned_; }
  void hand_over(std::uint32_t state);

  protocol::SlotView slot_;
  std::uint64_t request_capacity_;
  std::uint64_t output_capacity_;
  RunningChild& running_;
  SlotCgroup& slot_cgroup_;
  bool close_extra_fds_;
  CpuSet launch_cpus_;      // the CPU set to give back after a driver's CPU pin
  CpuSet every_cpu_;        // launch_cpus_.every_cpu(): where launch_cpus_ is refused
  bool same_cpu_handoff_ = false;  // the current request came with the driver's pin
  // This process may still be on one CPU: a give-back was refused (retried each request).
  bool still_pinned_ = false;
  std::uint32_t cpu_flags_ = 0;  // the current reply's kCpusWidened / kCpusNotGivenBack
  DecodedRequest request_;  // reused between commands to keep allocations off the path
  CommandOutcome outcome_;
  std::int64_t received_ns_ = 0;
  std::int64_t started_ns_ = 0;
};

}  // namespace spawnpool::detail
