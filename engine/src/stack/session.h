// One build's command stack: made once from the build's options, it owns the layers and
// stacks them, always in this order (top first; a layer nobody asked for is not there):
//
//   launcher     LauncherLayer (command/launcher_layer.h): a compile runs through the
//                compiler launcher and is not local
//   recorded     TraceLayer (trace_layer.h) over StatsLayer (stats_layer.h): the trace
//                and the statistics see every result, with the line that ran
//   sync         SyncLayer (sync_layer.h): a passthrough command runs captured and its
//                output is printed as one block when it ends
//   direct exec  DirectExec (command/direct_exec.h): `sh -c LINE` without shell syntax
//                runs as its program, with sh's PWD, status and messages
//   base         what runs it: the pool (PoolLayer, pool_layer.h), or the caller's layer
//                (the Python package's Popen fallback and test fake)
//
// Why this order: the launcher rewrites what runs before anything records it (so the
// trace and the statistics record the launched line); they record the status sh would
// have given; output sync captures what direct exec adds
// (sh's "Segmentation fault"); direct exec sits on the base because only there is it
// known that a program could not start and the line needs sh after all.
//
// runner() runs a command through every layer; checks_runner() through those below the
// launcher (SCons' Configure checks, which the launcher leaves alone). The door is
// prepare(): the command made final and read once, with the session's compile
// classifier. rebase() moves the stack onto another base (a resized pool). The trace
// and the report are the session's too (trace_recording.h): recorded from its making,
// written by finish().
//
// Threading: runner() and checks_runner() are thread-safe (every layer is); the session
// is made, rebased, finished and destroyed by one thread while no command runs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/src/command/compile_classifier.h"
#include "engine/src/command/launcher_layer.h"
#include "engine/src/stack/build_statistics.h"
#include "engine/src/stack/layer.h"
#include "engine/src/stack/stats_layer.h"
#include "engine/src/stack/trace_layer.h"
#include "engine/src/stack/trace_recording.h"
#include "engine/src/stack/trace_writer.h"
#include "spawnpool/pool.h"
#include "spawnpool/session.h"

namespace spawnpool::detail {

// The options are the public API's (spawnpool/session.h): one spec, documented there.
using SessionOptions = spawnpool::SessionOptions;

class Session {
 public:
  /// The stack on `base` (not owned; it must outlive the session or be rebased away).
  /// Throws std::invalid_argument for a launcher that is not a plain command (empty
  /// after all, or with shell syntax): the caller says so and goes on without it. A
  /// trace or report that cannot be recorded is a warning (SessionOptions::warn).
  Session(Layer& base, SessionOptions options);
  /// The stack on a PoolLayer of `pool` (owned by the session).
  Session(Pool& pool, SessionOptions options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  Layer& runner() { return *top_; }
  Layer& checks_runner() { return *checks_; }
  /// The stack's door: `command` made final (prepare_command.h) with this session's
  /// compile classifier. Call it on the caller's thread.
  PreparedCommand prepare(Command command) const;
  /// prepare() then runner().run() (checks_runner() for `check`): a failing command is
  /// its Result.
  Result run(Command command, bool check = false);

  /// Puts the layers on another base (no command may be running).
  void rebase(Layer& base);
  void rebase(Pool& pool);
  /// The end of the build: closes the trace and writes the report (its problems are
  /// warnings). Idempotent; no command may be running.
  void finish() { recording_.finish(); }

  /// The launcher, or null when none was asked for.
  const Launcher* launcher() const { return launcher_ ? &launcher_->launcher() : nullptr; }
  /// What the launcher did, without a newline ("" without a launcher): launcher_layer.h.
  std::string launcher_summary() const { return launcher_ ? launcher_->summary() : ""; }
  LauncherCounts launcher_counts() const { return launcher_ ? launcher_->counts() : LauncherCounts{}; }
  bool direct_exec() const { return direct_exec_ != nullptr; }
  bool output_sync() const { return sync_ != nullptr; }
  /// The trace (trace_path's, or the report's temporary one), or null: none asked for,
  /// or it could not be written.
  const std::shared_ptr<TraceWriter>& trace() const { return recording_.trace(); }
  /// The statistics, or null when none were asked for.
  BuildStatistics* statistics() const { return statistics_.get(); }
  /// The statistics' report text (BuildStatistics::report), "" without statistics.
  std::string statistics_report(const std::string& prefix) const {
    return statistics_ ? statistics_->report(prefix) : std::string();
  }

 private:
  // The bottom of every stack: forwards to the base, which rebase() changes.
  class BaseSeam : public Layer {
   public:
    explicit BaseSeam(Layer& base) : base_(&base) {}
    Result run(PreparedCommand& command) override { return base_->run(command); }
    Layer* base_;
  };

  Session(std::unique_ptr<Layer> owned_base, Layer* base, SessionOptions options);

  const CompileClassifier classifier_;
  std::unique_ptr<Layer> owned_base_;  // the PoolLayer made for a Pool, else null
  BaseSeam seam_;
  std::unique_ptr<Layer> direct_exec_;  // null: not asked for
  std::unique_ptr<Layer> sync_;         // null: not asked for
  // Recorded goes on sync (or what is below it), the launcher on it.
  std::shared_ptr<BuildStatistics> statistics_;  // null: none asked for
  std::unique_ptr<StatsLayer> stats_layer_;
  TraceRecording recording_;                     // the trace (or none) and the report
  std::unique_ptr<TraceLayer> trace_layer_;
  std::unique_ptr<LauncherLayer> launcher_;  // null: no launcher
  Layer* checks_;  // the top below the launcher
  Layer* top_;     // every layer
};

}  // namespace spawnpool::detail
