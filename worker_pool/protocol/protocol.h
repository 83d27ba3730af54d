// The shared-memory protocol between the driver (engine/) and its spawner processes.
//
// One segment holds a SegmentHeader and `slot_count` fixed-size slots, one per spawner.
// Threading model: a slot is owned alternately by the driver and by its spawner. The
// slot's state word says whose turn it is; only the side whose turn it is writes the
// rest of the slot, then hands the turn over with one release store and a futex wake.
// No process-shared mutex exists, so a peer that dies can never leave a lock held.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "spawnpool/failure_stage.h"

namespace spawnpool::protocol {

inline constexpr std::uint64_t kMagic = 0x316c6f6f706e7073;  // "spnpool1"
inline constexpr std::uint32_t kVersion = 6;  // 6: SlotControl::stop_signal

// File descriptors a spawner finds at start (see docs/architecture.md).
inline constexpr int kSegmentFd = 3;   // the shared-memory segment
inline constexpr int kLifelineFd = 4;  // seqpacket socket to the driver: EOF = driver gone

/// Slot states. The comment after each value says whose turn it is.
enum SlotState : std::uint32_t {
  kStarting = 0,     // spawner: launched, not attached yet
  kIdle = 1,         // driver: spawner waits for a request
  kRequest = 2,      // spawner: a request is in the request area
  kReply = 3,        // driver: reply header and one output chunk are ready
  kNextChunk = 4,    // spawner: driver copied the chunk and wants the next one
  kSpawnerDead = 5,  // driver: written by the driver's monitor once the spawner died
};

/// True when the spawner, not the driver, is expected to act next.
inline bool is_spawner_turn(std::uint32_t state) {
  return state == kStarting || state == kRequest || state == kNextChunk;
}

/// Request flags.
enum RequestFlags : std::uint32_t {
  kCaptureOutput = 1u << 0,  // stdout/stderr go to pipes and come back in the reply
  kMergeStderr = 1u << 1,    // with kCaptureOutput: stderr into the stdout stream
  // Same-CPU hand-off (worker_pool/protocol/cpu_affinity.h): the driver pinned the spawner to its
  // own CPU for this wake-up; the command starts there too, gets the spawner's CPU set
  // back just before exec, and the spawner restores its own right after the launch. In
  // turn the spawner may pin the waiting driver thread (SlotControl::waiter_tid) to its
  // CPU before the reply's wake-up, and says so with kWaiterPinned.
  kSameCpuHandoff = 1u << 2,
  kKnownRequestFlags = kCaptureOutput | kMergeStderr | kSameCpuHandoff,
};

struct SegmentHeader {
  std::uint64_t magic;
  std::uint32_t version;
  std::uint32_t slot_count;
  std::uint64_t slot_size;          // bytes per slot, a multiple of the page size
  std::uint64_t request_capacity;   // bytes of request payload a slot holds
  std::uint64_t output_capacity;    // bytes of output one reply chunk holds
};

/// The words both sides touch concurrently, each on its own cache line.
// The control words are shared between processes: they must not hide a lock.
static_assert(std::atomic<std::uint32_t>::is_always_lock_free &&
              std::atomic<std::uint64_t>::is_always_lock_free);

struct alignas(64) SlotControl {
  std::atomic<std::uint32_t> state;     // a SlotState; futex word
  std::atomic<std::int32_t> spawner_pid;
  std::atomic<std::int32_t> child_pid;  // running command (its own process group), 0 if none
  // The driver thread that may sleep for this slot's reply (0: none). Written by the
  // driver whatever the turn; read by the spawner for the same-CPU hand-off (which reads
  // the thread's CPU set from the kernel: no mask here, so no cap on CPU numbers).
  std::atomic<std::int32_t> waiter_tid;
  // The first SIGINT, SIGTERM or SIGHUP this slot's spawner took (0: none). Spawners share
  // the driver's process group, so a Ctrl-C reaches them as it reaches the driver, and
  // a command it ends frees its slot before the driver's own handler may have run: the
  // driver reads this before it starts a command (engine/src/pool/stop_signal.h).
  // Written by the spawner's watch thread, read by the driver; never cleared.
  std::atomic<std::int32_t> stop_signal;
};

struct RequestHeader {
  std::uint32_t flags;         // RequestFlags
  std::uint32_t argc;          // >= 1
  std::uint32_t envc;
  std::uint32_t number;        // counts the slot's requests (wraps); names it in a cancel
  std::uint64_t payload_size;  // argv, env then cwd: NUL-terminated strings, back to back
};

/// What the driver sends on a spawner's lifeline (a SOCK_SEQPACKET socket: one message
/// each) to signal the process group of the command of request `number` (and, with a
/// slot cgroup, everything in the slot). kGoodbye instead says the driver is closing the
/// pool: the EOF that follows is no driver death, so the spawner leaves the pool's other
/// cgroups to the driver.
struct CancelMessage {
  std::uint32_t number;
  std::int32_t signal;
};
inline constexpr CancelMessage kGoodbye{0, 0};

/// A spawner's second argument when its pool has a memory budget but no slot cgroups:
/// it becomes its descendants' subreaper, and cancel and close reach all of them (what
/// a slot cgroup's kill-all reaches otherwise). Else the argument is the slot's cgroup.
inline constexpr const char kReachDescendantsArgument[] = "descendants";

/// Reply flags.
enum ReplyFlags : std::uint32_t {
  kWaiterPinned = 1u << 0,  // the spawner pinned waiter_tid to its CPU: the driver restores
  kMemoryFromCgroup = 1u << 1,  // peak_memory_bytes is the command's cgroup's, not ru_maxrss
  kOomKilled = 1u << 2,     // the OOM killer killed a process of the slot while it ran
  // The give-backs after a same-CPU hand-off (cpu_affinity.h, give_back_cpus), which the
  // driver reports (once). kCpusWidened: the kernel refused the spawner its own CPU set
  // (a cpuset changed): it has every CPU its cpuset allows. kCpusNotGivenBack: it refused
  // the spawner or the command every CPU too: either may still be on the one CPU of the
  // pin; the driver puts the spawner's set back from outside and gives no more hints.
  kCpusWidened = 1u << 3,
  kCpusNotGivenBack = 1u << 4,
  // With kMemoryFromCgroup: the peak is the highest of memory.current samples taken while
  // the command ran (no memory.peak: v2 before 5.19), not the cgroup's own peak.
  kMemorySampled = 1u << 5,
};

struct ReplyHeader {
  std::int32_t failure_stage;  // a spawnpool::FailureStage, at most kLastSpawnerStage
  std::int32_t error_number;   // errno for a failure, else 0
  std::int32_t wait_status;    // as from wait4(), when the command ran
  std::uint32_t flags;         // ReplyFlags
  std::int64_t user_usec;
  std::int64_t system_usec;
  std::int64_t max_rss_kb;
  std::int64_t peak_memory_bytes;  // the command's peak (kMemoryFromCgroup says whose); 0 if none
  // CLOCK_MONOTONIC nanoseconds, a clock shared by every process of the machine.
  std::int64_t received_ns;   // spawner saw the request
  std::int64_t launch_ns;     // just before the clone that starts the command (0: none)
  std::int64_t started_ns;    // the child exists
  std::int64_t exited_ns;     // the child was reaped
  std::int64_t replied_ns;    // the first reply chunk was handed over
  std::uint64_t stdout_size;  // whole captured stdout
  std::uint64_t stderr_size;  // whole captured stderr
  std::uint64_t chunk_offset; // where this chunk starts in stdout followed by stderr
  std::uint64_t chunk_size;
};

// tests/fuzz/make_seed_corpus.py packs this layout byte for byte.
static_assert(sizeof(ReplyHeader) == 120, "ReplyHeader changed: update the fuzz seeds");

/// Pointers into one slot of a mapped segment.
struct SlotView {
  SlotControl* control;
  RequestHeader* request;
  char* request_payload;
  ReplyHeader* reply;
  char* output;
};

/// Bytes one slot needs for the given capacities, rounded up to `page_size`.
std::uint64_t slot_size_for(std::uint64_t request_capacity, std::uint64_t output_capacity,
                            std::uint64_t page_size);

/// Bytes of the whole segment: the header page plus every slot.
std::uint64_t segment_size(const SegmentHeader& header, std::uint64_t page_size);

/// The slot `index` of a segment mapped at `base`. The caller checks `index`.
SlotView slot_at(void* base, const SegmentHeader& header, std::uint32_t index,
                 std::uint64_t page_size);

/// Whether a mapped header of `mapped_size` bytes describes a segment this build speaks.
bool header_is_valid(const SegmentHeader& header, std::uint64_t mapped_size,
                     std::uint64_t page_size);

}  // namespace spawnpool::protocol
