// One build's command stack, for a C++ build driver: the same layers, in the same order,
// that the SCons plugin, `spawnpool run` and the Python package run every command
// through (docs/architecture.md, "The command stack"): the compiler launcher for compiles,
// the trace and the statistics, output printed as one block per command, direct exec of
// simple `sh -c` lines, and the pool (whose scheduler grants each command its slot, local
// slot, make's jobserver token and memory at once: PoolOptions). Each option is named
// and documented once, here: the engine's Session takes these, and the Python package's
// Settings (options.py) are mapped onto them (engine/python/stack_binding.cc).
//
//   spawnpool::Pool pool(pool_options);          // jobserver, memory budget, slots
//   spawnpool::SessionOptions options;
//   options.launcher = "distcc";
//   options.output_sync = true;
//   options.trace_path = "build.trace.json";
//   options.stats_slots = 8;
//   spawnpool::Session session(pool, options);
//   spawnpool::Result r = session.run(command);  // from any number of threads
//   session.finish();
//   std::fputs(session.report().c_str(), stdout);
//
// examples/cpp/build_driver.cc is a whole driver. Threading: run() and run_check() are
// thread-safe; the session is made, finished and destroyed by one thread while no command
// runs. A failing command is its Result, never an exception.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spawnpool/pool.h"
#include "spawnpool/result.h"

namespace spawnpool {

namespace detail {
class Session;
class TraceWriter;
class BuildStatistics;
}  // namespace detail

/// The extra args of a traced command's event, as JSON object members without the braces
/// (`"targets":["a.o"]`), or "": called on the command's own thread after it ran (the
/// SCons plugin gives the action's targets and inputs, for the report's critical path).
/// It must not throw.
using TraceArgs = std::function<std::string()>;

/// What a build's stack holds. A layer that is not asked for is not there.
struct SessionOptions {
  /// The compiler launcher as shell text ("distcc", "ccache distcc"); blank: none.
  /// Compiles run through it and are not local (PoolOptions::local_slots).
  std::string launcher;
  /// Compiler names besides the default ones (gcc, g++, cc, c++, clang, ...).
  std::vector<std::string> compilers;
  /// Run simple `sh -c LINE` lines (no shell syntax) as their program, with sh's
  /// environment, status and messages: one fork+exec less per command.
  bool direct_exec = true;
  /// Print each passthrough command's output as one block when it ends (make's -O):
  /// `--output=sync`, and what a status line needs (every output line whole).
  bool output_sync = false;
  /// What starts the launcher's messages and summary ("spawnpool", "scons").
  std::string message_prefix = "spawnpool";
  /// The driver's environment ("NAME=value"): the launcher is found on its PATH and takes
  /// its HOME, DISTCC_* ... Unset: the driver's now.
  std::optional<std::vector<std::string>> driver_environment;

  /// The build trace (Chrome's trace-event format; `spawnpool report` reads it), written
  /// to this file (created or truncated); its process name and the build's command line
  /// (for the report; "": none). Empty: no trace.
  std::string trace_path;
  std::string trace_process_name = "spawnpool";
  std::string trace_command_line;
  /// Or a trace already open (shared; instead of trace_path): a binding opens it early,
  /// to report an unwritable file before the build starts.
  std::shared_ptr<detail::TraceWriter> trace;
  /// More args for each traced command that ran; empty: none.
  TraceArgs trace_args;
  /// The end-of-build statistics for this many slots; unset: none.
  std::optional<int> stats_slots;
  /// Or statistics made by the caller (shared; instead of stats_slots).
  std::shared_ptr<detail::BuildStatistics> statistics;
};

/// The local slots (PoolOptions::local_slots) of a build that names none: with a
/// launcher, the CPUs this process may run on, since the compiles go elsewhere and the
/// commands left here (links, archives, the configure checks) should not overload this
/// machine; without one, 0 (no bound beyond the pool's slots). Every front end asks this
/// one function: the SCons plugin, `spawnpool run`, the Python package and the example.
std::size_t default_local_slots(const std::string& launcher);

class Session {
 public:
  /// The stack on `pool` (not owned: it must outlive the session). Throws
  /// std::invalid_argument for a launcher that is not a plain command (shell syntax),
  /// std::system_error for a trace_path that cannot be written.
  Session(Pool& pool, SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs `command` through every layer and waits for it. Thread-safe.
  Result run(Command command);
  /// The same below the launcher: what a configure check runs (the launcher leaves it
  /// alone). Thread-safe.
  Result run_check(Command command);

  /// The end of the build: closes the trace (idempotent). No command may be running.
  void finish();
  /// The end-of-build text: the statistics (with stats_slots or statistics) and what the
  /// launcher did (with a launcher), each line starting with message_prefix; "" if none.
  std::string report() const;

  /// The engine's session under this one (for the bindings).
  detail::Session& engine() { return *session_; }

 private:
  std::unique_ptr<detail::Session> session_;
  std::string message_prefix_;
};

}  // namespace spawnpool
