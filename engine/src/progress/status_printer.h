// The console side of the build's progress (issue 18): the status printer owns the bottom
// line of a terminal (kLine: Ninja's LinePrinter is the model) or prints a progress line
// now and then into a log (kPlain), and every other output of the build is written
// through it, so that no output line is ever cut or overwritten by the status line.
// kLine: before output, the line is cleared ("\r" and erase to the end of the line);
// once the output ends with a newline, the line is drawn again: a new view when the
// progress changed (BuildProgress::changes(): the counts, the ETA's inputs) and a period
// (100 ms) has passed since the last, else the text drawn last. A thread draws it when
// the clock's second moves, and the progress's changes when no output came for a period
// (at most once a period), at the terminal's width read each time (so a resize, SIGWINCH,
// is followed within a second); in between it sleeps, so that a build of long commands
// wakes it about once a second, and one whose output flows about as often (Ninja draws
// only at its events; its line has no clock). kPlain: a
// line (status_format.h, no escape codes) every 10 s or every 10% of the total, only
// between output lines. finish() clears the line and writes one summary line.
// Thread-safe: write() and finish() from any thread; one mutex orders all output.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "engine/src/progress/build_progress.h"

namespace spawnpool::detail {

enum class StatusMode { kLine, kPlain };

struct StatusPrinterOptions {
  int fd = 1;                 ///< where the status goes (SCons: where it prints command lines)
  StatusMode mode = StatusMode::kLine;
  bool unicode = false;       ///< " · " between the parts (a UTF-8 locale), else " - "
  std::chrono::milliseconds redraw_period{100};   ///< kLine: at most one draw a period
  std::chrono::milliseconds plain_period{10000};  ///< kPlain: at least this often...
  unsigned plain_percent_step = 10;               ///< ...and at each such step of the total
  /// The terminal rewraps lines when it narrows (tmux, VTE, kitty, iTerm2...; xterm
  /// cuts them instead): a status line wider than the new width then takes more rows,
  /// and all of them are cleared before it is drawn again.
  bool terminal_reflows = true;
};

class StatusPrinter {
 public:
  /// Starts the redraw thread. kLine needs `options.fd` to be a terminal (or a caller
  /// that asked for escape codes anyway, CLICOLOR_FORCE); the caller decides.
  StatusPrinter(std::shared_ptr<BuildProgress> progress, StatusPrinterOptions options);
  ~StatusPrinter();  ///< finish()
  StatusPrinter(const StatusPrinter&) = delete;
  StatusPrinter& operator=(const StatusPrinter&) = delete;

  /// Writes `data` to `fd` (1 or 2, or another) whole, above the status line: in kLine,
  /// when `fd` is the terminal the line is on, the line is cleared first and drawn again
  /// once the output ends a line. Errors (EPIPE) are ignored, as a closed reader is.
  void write(int fd, std::string_view data);
  /// Stops the thread, clears the line and writes the summary line of `progress`'s
  /// final view (BuildProgress::finish()); `interrupted`: the build was stopped (Ctrl-C).
  /// Idempotent.
  void finish(std::int64_t now_ns, bool interrupted = false);

  /// The summary line (also the last plain line): "[N/N 100%] M:SS elapsed, done",
  /// and ", F failed" when some failed; "interrupted" instead of both for a stopped build
  /// (its commands killed by the stop would count as failed).
  static std::string summary(const StatusView& view, std::uint64_t failed,
                             bool interrupted = false);

 private:
  void run();
  void redraw_when_changed(std::unique_lock<std::mutex>& lock);  // kLine's loop
  bool draw_is_due(std::int64_t now_ns) const;    // mutex_ held
  void draw(std::int64_t now_ns);                 // mutex_ held
  void print_plain(std::int64_t now_ns, bool force);  // mutex_ held
  bool on_status_terminal(int fd);                // mutex_ held
  void raw_write(int fd, std::string_view data);  // mutex_ held
  void raw_writev(int fd, std::initializer_list<std::string_view> pieces);  // at most 4; mutex_ held
  std::size_t width();                            // mutex_ held

  std::shared_ptr<BuildProgress> progress_;
  const StatusPrinterOptions options_;

  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;            // guarded by mutex_
  bool finished_ = false;        // guarded by mutex_
  bool shown_ = false;           // the status line is on the screen, the cursor at its end
  bool mid_line_ = false;        // the last output did not end with a newline
  std::string last_drawn_;       // what the line shows now
  std::size_t width_ = 0;        // the terminal's columns at the last draw
  std::uint64_t drawn_changes_ = ~std::uint64_t{0};  // progress_->changes() at the last draw
  std::int64_t next_second_ns_ = 0;  // when the last draw's clock shows its next second
  std::int64_t last_draw_ns_ = 0;    // the last draw (a view taken, or mid-line output waited)
  std::int64_t last_output_ns_ = 0;  // the last output on the status's terminal
  int same_terminal_[3] = {-1, -1, -1};  // fds 0-2: on the status line's terminal? (-1: unknown)
  std::int64_t last_plain_ns_ = 0;
  std::uint64_t last_plain_step_ = 0;
  std::thread thread_;
};

}  // namespace spawnpool::detail
