#include "engine/src/progress/status_printer.h"

#include <errno.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

// Clears the line the cursor is on and puts the cursor at its start.
constexpr std::string_view kClearLine = "\r\x1b[K";

}  // namespace

StatusPrinter::StatusPrinter(std::shared_ptr<BuildProgress> progress, StatusPrinterOptions options)
    : progress_(std::move(progress)), options_(options) {
  last_plain_ns_ = monotonic_ns();
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

// kLine: the line drawn again after the output is the text drawn last, not a new view:
// a view of a build with a history sorts its predictions (tens of microseconds, under
// the progress's mutex, which the pool's threads take at each command), and SCons
// writes a line for every command; the redraw thread brings the text up to date within
// its period. When the output goes to the status's own fd, the clear, the output and
// the line go in one write (one system call instead of three, per line).
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
  if (mid_line_ || finished_ || last_drawn_.empty() || width_ == 0) {
    raw_write(options_.fd, clear);
    raw_write(fd, data);
    if (!mid_line_ && !finished_) {
      last_drawn_.clear();
      draw(monotonic_ns());
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

// Each round: kLine redraws (the clock moves, commands start); kPlain prints when a
// period has passed or the build crossed a step of its total.
void StatusPrinter::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  const auto period = options_.mode == StatusMode::kLine ? options_.redraw_period
                                                         : std::chrono::milliseconds(1000);
  while (!stop_) {
    wake_.wait_for(lock, period, [&] { return stop_; });
    if (stop_) break;
    if (options_.mode == StatusMode::kLine)
      draw(monotonic_ns());
    else
      print_plain(monotonic_ns(), false);
  }
}

void StatusPrinter::draw(std::int64_t now_ns) {
  if (mid_line_) return;  // a line of output is not finished: the status waits
  std::string out(kClearLine);
  // The width is read at each draw (one ioctl, at most every redraw period and output
  // line), so a resize is followed within a period. Not by a SIGWINCH handler of ours:
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
  const std::string text =
      format_status(progress_->view(now_ns), columns > 1 ? columns - 1 : 0, options_.unicode);
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
