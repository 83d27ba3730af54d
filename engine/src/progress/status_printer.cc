#include "engine/src/progress/status_printer.h"

#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

// Clears the line the cursor is on and puts the cursor at its start.
constexpr std::string_view kClearLine = "\r\x1b[K";

}  // namespace

StatusPrinter::StatusPrinter(std::shared_ptr<BuildProgress> progress, StatusPrinterOptions options)
    : progress_(std::move(progress)), options_(options) {
  last_plain_ns_ = last_draw_ns_ = monotonic_ns();
  next_second_ns_ = last_draw_ns_ + std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        options_.redraw_period).count();  // the first draw
  thread_ = std::thread([this] { run(); });
}

StatusPrinter::~StatusPrinter() { finish(monotonic_ns()); }

std::string StatusPrinter::summary(const StatusView& view, std::uint64_t failed,
                                   bool interrupted) {
  std::string line = "[" + group_thousands(view.done) + "/" + group_thousands(view.total) +
                     (view.done == view.total ? " 100%] " : " " +
                          std::to_string(view.total ? view.done * 100 / view.total : 0) + "%] ") +
                     format_clock(view.elapsed_s) + " elapsed, ";
  if (interrupted) return line + "interrupted";
  line += "done";
  if (failed) line += ", " + group_thousands(failed) + " failed";
  return line;
}

// kLine: the line drawn again after the output is the text drawn last, not a new view,
// but at most once a period, when the progress has changed: a view of a build with a
// history sorts its predictions (tens of microseconds, under the progress's mutex, which
// the pool's threads take at each command), and SCons writes a line for every command.
// While output flows, the line is so kept current by the threads that write it, which
// are awake anyway; the redraw thread, whose every wake-up costs (on a virtual machine,
// more than the draw), need not wake up for it. When the output goes to the status's own
// fd, the clear, the output and the line drawn last go in one write.
void StatusPrinter::write(int fd, std::string_view data) {
  if (data.empty()) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const bool here = on_status_terminal(fd);
  if (options_.mode != StatusMode::kLine || !here) {
    raw_write(fd, data);
    if (here) mid_line_ = data.back() != '\n';
    return;
  }
  const std::string_view clear = shown_ ? kClearLine : std::string_view();
  shown_ = false;
  mid_line_ = data.back() != '\n';
  const std::int64_t now_ns = monotonic_ns();
  last_output_ns_ = now_ns;
  if (mid_line_ || finished_ || last_drawn_.empty() || width_ == 0 || draw_is_due(now_ns)) {
    raw_write(options_.fd, clear);
    raw_write(fd, data);
    if (!mid_line_ && !finished_) {
      last_drawn_.clear();
      draw(now_ns);
    }
    return;
  }
  if (fd == options_.fd) {
    raw_writev(fd, {clear, data, kClearLine, last_drawn_});
  } else {
    raw_write(options_.fd, clear);
    raw_write(fd, data);
    raw_writev(options_.fd, {kClearLine, last_drawn_});
  }
  shown_ = true;
}

void StatusPrinter::finish(std::int64_t now_ns, bool interrupted) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (finished_) return;
    finished_ = stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  const StatusView last = progress_->finish(now_ns);
  std::lock_guard<std::mutex> lock(mutex_);
  if (shown_) raw_write(options_.fd, kClearLine);
  shown_ = false;
  raw_write(options_.fd, (mid_line_ ? "\n" : "") + summary(last, progress_->failed(), interrupted) + "\n");
}

// kLine draws when the line would show something new; kPlain prints, once a second's
// check, when a period has passed or the build crossed a step of its total.
void StatusPrinter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (options_.mode == StatusMode::kLine) return redraw_when_changed(lock);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_; });
    if (!stop_) print_plain(monotonic_ns(), false);
  }
}

// The thread sleeps until the line would show something new that no output will draw:
// the clock's next second, or a change of the progress once output has paused for a
// period (at most one draw a period); while nothing changed and no output came for a
// period, the progress's listener wakes it at the next change (else a change waits for
// the output, or for the next second). The listener notifies without this mutex (it is
// called under the progress's lock, which draw() takes inside this one): a wake-up lost
// in the instant before the wait only delays the line to the next second.
void StatusPrinter::redraw_when_changed(std::unique_lock<std::mutex>& lock) {
  progress_->set_change_listener([this] { wake_.notify_one(); });
  const std::int64_t period_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.redraw_period).count();
  while (!stop_) {
    const std::int64_t now_ns = monotonic_ns();
    const bool changed = progress_->changes() != drawn_changes_;
    std::int64_t due_ns = next_second_ns_;
    if (changed && now_ns - last_output_ns_ >= period_ns)
      due_ns = std::min(due_ns, last_draw_ns_ + period_ns);
    if (now_ns >= due_ns) {
      draw(now_ns);
      // Output that did not end its line made draw() wait: again in a period, not at once.
      last_draw_ns_ = now_ns;
      if (now_ns >= next_second_ns_) next_second_ns_ = now_ns + period_ns;
      continue;
    }
    // While output flows, its writer draws the changes: no wake-up for them.
    const bool listening = !changed && now_ns - last_output_ns_ >= period_ns;
    if (listening) progress_->listen_for_change();
    wake_.wait_for(lock, std::chrono::nanoseconds(due_ns - now_ns), [&] {
      return stop_ || (listening && progress_->changes() != drawn_changes_);
    });
  }
  lock.unlock();  // the listener goes under the progress's lock, not inside this one
  progress_->set_change_listener(nullptr);
  lock.lock();
}

// write(): the output ending a line draws a new view, not the text drawn last.
bool StatusPrinter::draw_is_due(std::int64_t now_ns) const {
  return progress_->changes() != drawn_changes_ &&
         now_ns - last_draw_ns_ >=
             std::chrono::duration_cast<std::chrono::nanoseconds>(options_.redraw_period).count();
}

void StatusPrinter::draw(std::int64_t now_ns) {
  if (mid_line_) return;  // a line of output is not finished: the status waits
  std::string out(kClearLine);
  // The width is read at each draw (one ioctl, about once a period at most), so a resize
  // is followed within a second (the clock's next draw, if nothing else draws first). Not by a SIGWINCH handler of ours:
  // the driver's runtime may hold SIGWINCH already (Python's readline does, in SCons).
  const std::size_t before = width_;
  width_ = 0;
  const std::size_t columns = width();
  if (columns != before) {
    // A narrower terminal that rewraps lines made the old status line several rows high,
    // the cursor on the last: clear the rows above it too.
    const std::size_t drawn = shown_ ? display_columns(last_drawn_) : 0;
    if (options_.terminal_reflows && drawn > columns)
      for (std::size_t rows = (drawn + columns - 1) / columns; rows > 1; --rows) out += "\x1b[A\x1b[K";
    last_drawn_.clear();
  }
  drawn_changes_ = progress_->changes();  // before the view: a change after it draws again
  last_draw_ns_ = now_ns;
  const StatusView view = progress_->view(now_ns);
  // The clock's next second, a millisecond past it so that the draw then shows it (and
  // not within a period: at most one draw a period).
  const double into_second = view.elapsed_s - std::floor(view.elapsed_s);
  next_second_ns_ = now_ns + std::max<std::int64_t>(
      static_cast<std::int64_t>((1.0 - into_second) * 1e9) + 1000000,
      std::chrono::duration_cast<std::chrono::nanoseconds>(options_.redraw_period).count());
  const std::string text =
      format_status(view, columns > 1 ? columns - 1 : 0, options_.unicode);
  if (shown_ && text == last_drawn_) return;
  out += text;
  raw_write(options_.fd, out);
  last_drawn_ = text;
  shown_ = true;
}

void StatusPrinter::print_plain(std::int64_t now_ns, bool force) {
  if (mid_line_) return;
  const StatusView view = progress_->view(now_ns);
  const std::uint64_t step =
      view.total ? view.done * 100 / view.total / std::max(options_.plain_percent_step, 1u) : 0;
  const bool due = now_ns - last_plain_ns_ >=
                   std::chrono::duration_cast<std::chrono::nanoseconds>(options_.plain_period).count();
  if (!force && !due && step <= last_plain_step_) return;
  raw_write(options_.fd, format_status(view, 0, options_.unicode) + "\n");
  last_plain_ns_ = now_ns;
  last_plain_step_ = std::max(step, last_plain_step_);
}

// Whether writing to `fd` moves the cursor of the terminal (or log) the status is on:
// the status's own fd, or another open on the same file (stderr on the same terminal).
bool StatusPrinter::on_status_terminal(int fd) {
  if (fd == options_.fd) return true;
  if (fd < 0 || fd > 2) return false;
  if (same_terminal_[fd] < 0) {
    struct stat a {}, b {};
    same_terminal_[fd] = fstat(fd, &a) == 0 && fstat(options_.fd, &b) == 0 &&
                         a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_rdev == b.st_rdev;
  }
  return same_terminal_[fd] == 1;
}

// All of `data`, also on a descriptor someone set non-blocking; EPIPE and other errors
// end it quietly (the reader went away: the build's own writes will say so).
void StatusPrinter::raw_write(int fd, std::string_view data) { raw_writev(fd, {data}); }

// The pieces in order, in one writev while the descriptor takes them all.
void StatusPrinter::raw_writev(int fd, std::initializer_list<std::string_view> pieces) {
  constexpr std::size_t kMaxPieces = 4;
  iovec io[kMaxPieces];
  std::size_t count = 0;
  for (const std::string_view piece : pieces)
    if (!piece.empty() && count < kMaxPieces)
      io[count++] = {const_cast<char*>(piece.data()), piece.size()};
  iovec* next = io;
  while (count > 0) {
    const ssize_t n = ::writev(fd, next, static_cast<int>(count));
    if (n > 0) {
      std::size_t left = static_cast<std::size_t>(n);
      while (count > 0 && left >= next->iov_len) {
        left -= next->iov_len;
        ++next;
        --count;
      }
      if (count > 0) {
        next->iov_base = static_cast<char*>(next->iov_base) + left;
        next->iov_len -= left;
      }
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
    } else {
      return;
    }
  }
}

std::size_t StatusPrinter::width() {
  if (width_ == 0) {
    winsize size{};
    width_ = ioctl(options_.fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 0 ? size.ws_col : 80;
  }
  return width_;
}

}  // namespace spawnpool::detail
