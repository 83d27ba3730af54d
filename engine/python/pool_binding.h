// _spawnpool.Pool: the engine's Pool for spawnpool.Pool (pool.py). run() reads the
// command with the GIL held, then submits and waits with it released (on the main thread
// waking every 100 ms for Python's signal handlers). Thread-safe as the Pool; close()
// lets the pool go as soon as no run() holds it.
#pragma once

#include <pybind11/pybind11.h>
#include <signal.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/python/conversions.h"
#include "engine/src/history/history_store.h"
#include "engine/src/progress/build_progress.h"
#include "spawnpool/jobserver.h"
#include "spawnpool/pool.h"

namespace spawnpool::python {

class PyPool {
 public:
  PyPool(std::size_t slots, std::string spawner, std::size_t output_chunk_bytes,
         bool same_cpu_handoff, py::handle memory_budget, py::handle history,
         py::handle cgroup_parent, std::string warning_prefix,
         std::shared_ptr<spawnpool::Jobserver> jobserver, std::size_t local_slots,
         int stop_signal_fd, py::handle progress) {
    spawnpool::PoolOptions options;
    options.slots = slots;
    options.spawner_path = std::move(spawner);
    options.output_chunk_bytes = output_chunk_bytes;
    options.same_cpu_handoff = same_cpu_handoff;
    options.memory_budget = to_memory_budget(memory_budget);
    // The history: a History shared with the build's progress, or a path the pool opens.
    if (py::isinstance<spawnpool::detail::HistoryStore>(history))
      options.history = history.cast<std::shared_ptr<spawnpool::detail::HistoryStore>>();
    else
      options.memory_history_path = optional_path(history);
    if (!progress.is_none())
      options.progress = progress.cast<std::shared_ptr<spawnpool::detail::BuildProgress>>();
    options.memory_cgroup_parent = optional_path(cgroup_parent);
    options.warn = warnings_to_stderr(std::move(warning_prefix));
    options.jobserver = std::move(jobserver);
    options.local_slots = local_slots;
    options.stop_signal_fd = stop_signal_fd;
    // Starting a pool with memory admission reads the history (SQLite) and makes cgroups.
    py::gil_scoped_release release;
    pool_ = std::make_shared<spawnpool::Pool>(std::move(options));
    slots_ = pool_->slots();
  }

  /// Runs one command; a command that never started is a Result with its failure.
  py::object run(py::handle command_object) {
    const spawnpool::Command command = to_command(command_object);
    const spawnpool::SubmitOptions how = to_submit_options(command_object);
    std::shared_ptr<spawnpool::Pool> pool = pool_;  // our own: close() may run meanwhile
    if (!pool) return to_python(closed_result(), command.output);
    std::optional<py::error_already_set> raised;
    spawnpool::Result r;
    // The GIL is released and taken back by hand, not by gil_scoped_release: at
    // interpreter exit a daemon thread taking the GIL back is ended by pthread_exit,
    // whose unwinding must not cross a noexcept destructor (std::terminate).
    PyThreadState* saved = PyEval_SaveThread();
    try {
      spawnpool::Job job = pool->submit(command, how);
      r = pool->wait(job, on_main_thread() ? tick_for(raised) : spawnpool::WaitTick{});
    } catch (...) {
      PyEval_RestoreThread(saved);
      throw;
    }
    PyEval_RestoreThread(saved);
    if (raised) throw std::move(*raised);
    return to_python(r, command.output);
  }

  void cancel(int sig) {
    if (pool_) pool_->cancel_all(sig);
  }
  /// Pool::interrupt(): waiting and later commands come back as killed by `sig`. Takes
  /// only the scheduler's lock, which nobody holds while waiting: safe from a signal
  /// handler (Python runs them between bytecodes, in the main thread).
  void interrupt(int sig) {
    if (std::shared_ptr<spawnpool::Pool> pool = pool_) {
      py::gil_scoped_release release;
      pool->interrupt(sig);
    }
  }
  /// Ends the spawners now and lets the segment go as soon as no run() holds it, rather
  /// than when Python collects this object (a traceback can keep it alive for long).
  void close() {
    std::shared_ptr<spawnpool::Pool> pool = std::move(pool_);
    if (!pool) return;
    py::gil_scoped_release release;
    pool->close();
    pool.reset();
  }
  std::size_t slots() const { return slots_; }
  /// The pool itself, for a Session's bottom layer (null once closed).
  std::shared_ptr<spawnpool::Pool> shared_pool() const { return pool_; }
  std::vector<int> spawner_pids() { return pool_ ? pool_->spawner_pids() : std::vector<int>{}; }

 private:
  std::shared_ptr<spawnpool::Pool> pool_;  // null once closed
  std::size_t slots_ = 0;
};


}  // namespace spawnpool::python
