// One build's command stack, for a C++ build driver: the same layers, in the same order,
// that the SCons plugin, `spawnpool run` and the Python package run every command
// through (docs/architecture.md, "The life of a command"): the compiler launcher for
// compiles, the trace and the statistics, output printed as one block per command, direct
// exec of simple `sh -c` lines, and the pool (whose scheduler grants each command its
// slot, local slot, make's jobserver token and memory at once: PoolOptions). Each option
// is named and documented once, here: the engine's Session takes these, and the Python
// package's Settings (options.py) are mapped onto them (engine/python/stack_binding.cc).
//
//   spawnpool::Pool pool(pool_options);          // jobserver, memory budget, slots
//   spawnpool::SessionOptions options;
//   options.launcher = "distcc";
//   options.output_sync = true;
//   options.trace_path = "build.trace.json";     // or report_path alone: the HTML report
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
  /// The build's HTML report (spawnpool/report.h), written by finish() from the trace:
  /// trace_path's, or without one a trace recorded for the report alone in a temporary
  /// file ($TMPDIR, else /tmp) that no way the driver ends leaves behind. Empty: none.
  std::string report_path;
  /// More args for each traced command that ran; empty: none.
  TraceArgs trace_args;
  /// The end-of-build statistics for this many slots; unset: none.
  std::optional<int> stats_slots;
  /// Or statistics made by the caller (shared; instead of stats_slots).
  std::shared_ptr<detail::BuildStatistics> statistics;

  /// How the front end spells its options, for the warnings ("--" gives "--report: ...",
  /// SCons' "--process-spawner-" gives "--process-spawner-report: ...").
  std::string option_prefix = "--";
  /// Receives the session's warnings, one sentence each, on the thread that makes or
  /// finishes the session: a trace or report that cannot be written, no temporary
  /// directory; the build goes on without what failed. Unset: "<message_prefix>:
  /// <sentence>" on stderr.
  std::function<void(const std::string&)> warn;
};

/// The local slots (PoolOptions::local_slots) of a build that names none: with a
/// launcher, the CPUs this process may run on, since the compiles go elsewhere and the
/// commands left here (links, archives, the configure checks) should not overload this
/// machine; without one, 0 (no bound beyond the pool's slots). Every front end asks this
/// one function: the SCons plugin, `spawnpool run`, the Python package and the example.
std::size_t default_local_slots(const std::string& launcher);

/// What decides where a build keeps the history of its commands (their peaks and
/// durations across builds: PoolOptions::memory_history_path). It is kept only where
/// something reads it: memory admission, or a status line (its ETA).
struct HistoryOptions {
  /// The history option's value: a file, a directory (memory-history.sqlite in it; "~"
  /// is the home directory), or "off"; "": default_path.
  std::string setting;
  /// The history where none is named (SCons: ".spawnpool/" at the top of the build);
  /// "": none.
  std::string default_path;
  /// Where a relative path starts; "": the current directory.
  std::string base_dir;
  bool memory = false;        ///< memory admission is on
  bool status_shown = false;  ///< a status line is shown (StatusLine::shown())
  /// How the front end spells its options, for the warning (SessionOptions::option_prefix).
  std::string option_prefix = "--";
};

/// The history file of a build, or "" (nothing reads it, it is off, or none is named).
/// A setting other than off while nothing reads it is one warning through `warn`
/// ("--history: only used with --memory or --status; ignored"). The pool, or a status
/// line's attach(), opens the file; its own problems (a read-only tree) are one warning
/// and a build without it. Every front end asks this one function: the SCons plugin,
/// `spawnpool run`, the Python package and the example.
std::string history_path(const HistoryOptions& options,
                         const std::function<void(const std::string&)>& warn = {});

class Session {
 public:
  /// The stack on `pool` (not owned: it must outlive the session). Throws
  /// std::invalid_argument for a launcher that is not a plain command (shell syntax). A
  /// trace that cannot be written is a warning (warn), and the build goes on without it.
  Session(Pool& pool, SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Runs `command` through every layer and waits for it. Thread-safe.
  Result run(Command command);
  /// The same below the launcher: what a configure check runs (the launcher leaves it
  /// alone). Thread-safe.
  Result run_check(Command command);

  /// The end of the build: closes the trace and writes the report (report_path; a
  /// problem is a warning). Idempotent; no command may be running.
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
