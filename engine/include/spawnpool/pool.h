// The pool a build driver embeds: pre-spawned spawner processes, one per job slot, fed
// over shared memory. Thread-safe: any number of threads may call run(), submit() and
// wait() at once; callers beyond the slot count queue for a free slot.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "spawnpool/command.h"
#include "spawnpool/jobserver.h"
#include "spawnpool/memory_budget.h"
#include "spawnpool/result.h"

namespace spawnpool {

namespace detail {
class PoolCore;
struct JobState;
class HistoryStore;
class BuildProgress;
struct PreparedCommand;
class PoolLayer;
}

struct PoolOptions {
  std::size_t slots = 0;         ///< job slots (spawner processes); 0: one per CPU
  /// The spawnpool-spawner executable; empty: $SPAWNPOOL_SPAWNER, else the installed one.
  std::string spawner_path;
  /// Bytes of captured output a reply carries per round trip; more goes in further chunks.
  std::size_t output_chunk_bytes = 1 << 20;
  std::chrono::milliseconds start_timeout{10000};  ///< per spawner, to attach
  /// Keep each hand-off on one CPU: the spawner is woken on the CPU of the thread that
  /// submits to it, and the thread waiting for the reply on the spawner's CPU (each side
  /// sleeps right after it hands over). Saves a cross-CPU wake-up per hand-off. Commands
  /// start on the submitting thread's CPU but may run on any CPU the spawner may use, and
  /// the waiting thread gets its own CPU set back as it wakes. Off by default: it saves
  /// 60-90 us per round trip but builds measured faster without it (docs/architecture.md,
  /// "The CPU hint", says why).
  bool same_cpu_handoff = false;

  // Admission: the Scheduler grants a command everything at once, at its dispatch: a
  // slot, a local slot (if it is local), a jobserver token and memory; a command never
  // holds one while it waits for another (docs/architecture.md, "One admission point").
  /// make's job slots, shared by every pool of the process (Jobserver::from_environment()
  /// early, then one for all pools); each running command holds one. Null: none. An
  /// unusable one runs one command at a time and says why once (warn).
  std::shared_ptr<Jobserver> jobserver;
  /// At most this many commands submitted as local (SubmitOptions::local) run at once:
  /// with a compiler launcher, the commands that do not go through it. 0: no limit.
  std::size_t local_slots = 0;
  /// The read end of a pipe that receives a byte (the signal's number) for each signal
  /// the driver takes (Python's signal.set_wakeup_fd()); -1: none. Before a dispatched
  /// command starts, the pool looks there, at SIGINT, SIGTERM, SIGHUP pending, and at
  /// those its spawners took (they are in the driver's process group): one of those
  /// means interrupt(sig) before the command starts. Closes the window between a Ctrl-C,
  /// which frees slots as it kills the running commands, and the driver's own handler,
  /// which may run later. Bytes of other signals are dropped. Not owned.
  int stop_signal_fd = -1;

  // Memory-aware admission (docs/features.md, "Memory-aware admission"). Off by default:
  // the pool then creates no cgroup and keeps no history, and peaks come from ru_maxrss.
  /// With a budget, each slot gets a cgroup (peaks of the whole command, OOM kills, cancel
  /// and close reach everything a command started), a command starts only while the
  /// running ones' predicted peaks plus its own fit (or nothing else runs), and one
  /// killed by the OOM killer runs again once, alone.
  MemoryBudget memory_budget;
  /// The SQLite file of commands' peaks and durations, read at start and written as
  /// commands finish, with or without a budget (without one, durations only); empty:
  /// none (every pool starts cold). Its problems are warnings, never errors.
  std::string memory_history_path;
  /// An open history shared with others (the build's progress, the pool that replaces
  /// this one when a build changes its job count): used instead of memory_history_path.
  std::shared_ptr<detail::HistoryStore> history;
  /// The build's progress (the status line, issue 18): told of each command submitted,
  /// started and finished; shared with the driver and with the next pool of the build.
  std::shared_ptr<detail::BuildProgress> progress;
  /// The cgroup (v1 memory or v2 directory) under which the pool makes its own; empty:
  /// the driver's memory cgroup. Where none can be made, the pool says so (warn) and
  /// measures with ru_maxrss.
  std::string memory_cgroup_parent;
  /// Receives the pool's warnings (an unusable history, no cgroups), one sentence each;
  /// called from any thread (the history's writer too), never with a pool lock held.
  /// Unset: "spawnpool: warning: <sentence>" on stderr.
  std::function<void(const std::string&)> warn;
};

/// How one command is to be admitted.
struct SubmitOptions {
  /// Counts against PoolOptions::local_slots: it runs on this machine (with a compiler
  /// launcher, every command that does not go through it).
  bool local = true;
};

/// A submitted command: it owns the command's state until its result is collected.
/// Move-only; wait for it with Pool::wait(). Destroying a Job that was not waited for
/// waits for it and discards the result (its slot must come back). Use one Job from one
/// thread at a time.
class Job {
 public:
  Job();
  Job(Job&& other) noexcept;
  Job& operator=(Job&& other) noexcept;
  ~Job();
  /// Whether this Job still has a result to collect.
  bool pending() const { return state_ != nullptr; }

 private:
  friend class Pool;
  Job(std::shared_ptr<detail::PoolCore> core, std::unique_ptr<detail::JobState> state);
  void discard() noexcept;
  std::shared_ptr<detail::PoolCore> core_;   // set while pending
  std::unique_ptr<detail::JobState> state_;  // null once the result was collected
};

/// Called while wait() sleeps, every tick; returns a signal number to send to the
/// command's process group, or 0. Lets an embedding runtime serve its own signal
/// handlers (the Python module does) during long commands.
using WaitTick = std::function<int()>;

class Pool {
 public:
  /// Starts the spawners and waits until each has attached. Throws std::system_error
  /// when the pool cannot start (spawner missing, segment refused...).
  explicit Pool(PoolOptions options = {});
  ~Pool();  ///< close()
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// Runs `command` and waits for it: submit() then wait().
  Result run(const Command& command);
  /// Hands `command` to a free slot, waiting for one while all are busy (a slot stays
  /// busy until its Job is waited for).
  /// It waits until it has everything it needs (PoolOptions, "Admission"); after
  /// interrupt(sig) it does not start: its result has returncode -sig.
  Job submit(const Command& command, const SubmitOptions& how = {});
  /// As submit(), but returns nothing instead of waiting when the scheduler would not
  /// start the command now (every slot busy, or others queued before it).
  std::optional<Job> try_submit(const Command& command, const SubmitOptions& how = {});
  /// Waits for `job` and returns its result; `job` is then empty. `tick`, if set, is
  /// called every `tick_period` while the command runs.
  Result wait(Job& job, const WaitTick& tick = {},
              std::chrono::milliseconds tick_period = std::chrono::milliseconds(100));

  /// Sends `sig` to the process group of the command `job` runs, if it still runs.
  void cancel(const Job& job, int sig);
  /// Sends `sig` to the process group of every running command. A command that was
  /// submitted before and is to run again after an OOM kill does not: its killed run is
  /// its result (an interrupted build must not start it again).
  void cancel_all(int sig);
  /// The build was interrupted by `sig`: commands waiting to start, and any submitted
  /// later, come back with returncode -sig without running (as if `sig` had killed
  /// them); running ones are left alone (cancel_all() signals them), and give back
  /// their tokens as they end. Safe from any thread; the first signal stays.
  void interrupt(int sig);

  /// Ends the spawners (their running commands get SIGKILL) and waits for them.
  /// A command in flight comes back killed by SIGKILL (returncode -9) if its spawner
  /// replied before exiting, else as a FailureStage::kPoolClosed failure ("the pool was
  /// closed"); so do commands still queued, and any submitted later. Idempotent.
  void close();
  std::size_t slots() const;
  /// Process ids of the spawners, for diagnostics and leak checks.
  std::vector<int> spawner_pids() const;

 private:
  // The engine's stack (engine/src/stack/pool_layer.h) hands over a command it prepared
  // at its own door: submit() without preparing it again.
  friend class detail::PoolLayer;
  Job submit_prepared(detail::PreparedCommand& command);

  std::shared_ptr<detail::PoolCore> core_;
};

}  // namespace spawnpool
