// The build's status line for a C++ build driver (issue 18): the progress line the SCons
// plugin and `spawnpool run` show, `[DONE/TOTAL PCT%] M:SS elapsed, ~M:SS left · ...`,
// redrawn at the bottom of a terminal with every output line above it whole, or a plain
// progress line now and then into a log, and one summary line at the end. The ETA comes
// from the history's learned durations (docs/features.md, "Build progress").
//
//   spawnpool::StatusLine status("auto");      // line on a terminal, else off
//   spawnpool::PoolOptions pool_options;       // ... memory_history_path = ".spawnpool/h"
//   spawnpool::SessionOptions session_options; // ... launcher, trace
//   status.attach(pool_options, session_options);  // before the pool and the session
//   spawnpool::Pool pool(pool_options);
//   spawnpool::Session session(pool, session_options);
//   status.begin(top_dir, targets);            // the build's clock starts
//   status.expect(commands_not_yet_run);       // as the driver learns it
//   ... session.run(command) ...               // output is printed above the line
//   status.print(2, "driver: a message\n");    // the driver's own lines too
//   status.finish();                           // cleared; the summary line
//
// While the line is shown, the command stack's output (output sync's blocks, the
// launcher's messages) goes through it; the driver's own output must too (print()).
// Threading: expect() and print() from any thread; the rest from one thread, begin()
// and finish() while no command runs. For C++ drivers: the Python package has its own
// (status.py, over the same engine's printer), since Python's streams own its console.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "spawnpool/pool.h"
#include "spawnpool/session.h"

namespace spawnpool {

namespace detail {
class BuildProgress;
class HistoryStore;
class StatusPrinter;
}  // namespace detail

class StatusLine {
 public:
  /// `setting`: auto, line, plain or off (`--status=`; detail::status_mode decides with
  /// TERM and CLICOLOR_FORCE whether `fd` gets a line, plain lines or nothing). Throws
  /// std::invalid_argument for another setting.
  explicit StatusLine(const std::string& setting, int fd = 1);
  ~StatusLine();  ///< finish()
  StatusLine(const StatusLine&) = delete;
  StatusLine& operator=(const StatusLine&) = delete;

  /// Whether anything is shown (line or plain lines); when not, every call is cheap and
  /// print() writes straight to the descriptor.
  bool shown() const { return mode_ != Mode::kOff; }
  /// Hands the pool its progress (PoolOptions::progress) and, with a history file and no
  /// open history, opens it once for both (PoolOptions::history): the ETA learns each
  /// command's duration across builds. Turns output sync on (SessionOptions::output_sync):
  /// the line needs every output line whole. Before the pool and the session are made.
  void attach(PoolOptions& pool, SessionOptions& session);
  /// The build starts: its clock, its targets' last build from the history (their key:
  /// `top_dir` and `targets` in any order), and the line takes the console.
  void begin(const std::string& top_dir, const std::vector<std::string>& targets);
  /// The driver expects `commands` more commands beyond those it has submitted (nullopt:
  /// it cannot tell; the history's last build of these targets then says).
  void expect(std::optional<std::size_t> commands);
  /// Absolute paths of files the commands still to come will write (the targets the
  /// driver knows are out of date): the history predicts each such command by the one
  /// that wrote its file last, as the SCons plugin does for its units. After begin().
  void expect_outputs(const std::vector<std::string>& paths);
  /// Writes `text` to `fd` whole, above the line (straight to `fd` when none is shown).
  void print(int fd, std::string_view text);
  /// Clears the line and prints the summary (`interrupted`: the build was stopped);
  /// gives the console back. Idempotent.
  void finish(bool interrupted = false);

 private:
  enum class Mode { kOff, kLine, kPlain };
  Mode mode_ = Mode::kOff;
  int fd_;
  std::shared_ptr<detail::HistoryStore> history_;  // shared with the pool; may be null
  std::shared_ptr<detail::BuildProgress> progress_;
  std::unique_ptr<detail::StatusPrinter> printer_;
};

}  // namespace spawnpool
