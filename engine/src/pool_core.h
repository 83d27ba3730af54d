// The driver side of the pool behind spawnpool::Pool: slot bookkeeping, the request and
// reply exchange with spawners, and a monitor thread that owns every spawner's life
// (noticing deaths through pidfds, starting replacements). Thread-safe.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "segment.h"
#include "spawner_process.h"
#include "spawnpool/pool.h"

namespace spawnpool::detail {

class PoolCore : public std::enable_shared_from_this<PoolCore> {
 public:
  explicit PoolCore(const PoolOptions& options);
  ~PoolCore();
  PoolCore(const PoolCore&) = delete;
  PoolCore& operator=(const PoolCore&) = delete;

  /// Submits `command`; when `blocking` is false and no slot is free, returns false.
  bool submit(const Command& command, bool blocking, Job& job);
  Result wait(Job& job, const WaitTick& tick, std::chrono::milliseconds tick_period);
  void cancel(int slot, int sig);
  void cancel_all(int sig);
  void close();
  std::size_t slot_count() const { return slots_.size(); }
  std::vector<int> spawner_pids() const;

 private:
  struct Slot {
    protocol::SlotView view;
    SpawnerProcess spawner;        // written by the monitor under mutex_
    std::atomic<bool> dead{false}; // set by the monitor when the spawner is gone
    bool restart_requested = false;  // guarded by mutex_
    std::string restart_error;       // guarded by mutex_: why the last restart failed
    std::string death;               // guarded by mutex_: how the spawner ended
    // The job in the slot; written by its submitter, read by its waiter.
    OutputMode output = OutputMode::kPassthrough;
    std::int64_t submitted_ns = 0;
    std::int64_t dispatched_ns = 0;
    std::uint32_t request_number = 0;  // of the job in the slot; read by cancels under mutex_
    bool same_cpu_handoff = false;     // the request went out with the spawner pinned
    std::string program;
    std::string cwd;
  };

  int acquire_slot(bool blocking, std::string& error);
  void release_slot(int index);
  bool ensure_spawner(Slot& slot, std::string& error);
  std::uint32_t await_driver_turn(int index, const WaitTick& tick,
                                  std::chrono::milliseconds tick_period);
  Result collect(int index, const WaitTick& tick, std::chrono::milliseconds tick_period);
  void fail_slot_protocol(int index);
  bool command_in_flight(const Slot& slot) const;

  // Spawner lifetime, run on the monitor thread (and by the constructor before it starts).
  void init_spawners();
  void start_spawner(std::uint32_t index);
  bool await_attach(Slot& slot, std::string& error);
  void monitor_loop();
  void handle_spawner_exit(Slot& slot);
  void mark_dead(Slot& slot);
  void restart_requested_spawners();
  void wake_monitor();

  PoolOptions options_;
  std::uint64_t arg_max_;
  Segment segment_;
  std::vector<std::unique_ptr<Slot>> slots_;
  mutable std::mutex mutex_;
  std::condition_variable slot_freed_;
  std::condition_variable spawner_changed_;
  std::vector<int> free_slots_;  // guarded by mutex_
  bool closed_ = false;          // guarded by mutex_
  bool stop_monitor_ = false;    // guarded by mutex_
  int monitor_wake_fd_ = -1;     // eventfd
  std::thread monitor_;
};

}  // namespace spawnpool::detail
