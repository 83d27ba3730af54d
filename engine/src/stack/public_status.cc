// spawnpool::StatusLine (spawnpool/status.h), the public API, over the engine's progress
// (progress/build_progress.h) and printer (progress/status_printer.h): the same line, ETA
// and summary the Python package shows. While the line is shown, the console the command
// stack prints to (command/console.h) is the printer.
#include "spawnpool/status.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <stdexcept>
#include <utility>

#include "engine/src/command/console.h"
#include "engine/src/history/history_store.h"
#include "engine/src/history/history_store_key.h"
#include "engine/src/progress/build_progress.h"
#include "engine/src/progress/status_mode.h"
#include "engine/src/progress/status_printer.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool {
namespace {

// The printer the console goes through (console::Writer takes plain functions): set by
// begin(), cleared by finish(), both while no command runs.
std::atomic<detail::StatusPrinter*> g_console_printer{nullptr};

void message_through_printer(std::string_view text) {
  if (detail::StatusPrinter* printer = g_console_printer.load()) printer->write(2, text);
}

void block_through_printer(std::string_view out, std::string_view err) {
  detail::StatusPrinter* printer = g_console_printer.load();
  if (printer == nullptr) return;
  if (!out.empty()) printer->write(1, out);
  if (!err.empty()) printer->write(2, err);
}

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a reader that went away: the text is lost, nothing else
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

StatusLine::StatusLine(const std::string& setting, int fd) : fd_(fd) {
  if (!detail::valid_status_setting(setting))
    throw std::invalid_argument("status must be auto, line, plain or off, not '" + setting + "'");
  const std::optional<detail::StatusMode> mode =
      detail::status_mode(setting, fd, detail::TerminalConventions::from_environment());
  if (mode) mode_ = *mode == detail::StatusMode::kLine ? Mode::kLine : Mode::kPlain;
}

StatusLine::~StatusLine() { finish(); }

void StatusLine::attach(PoolOptions& options, SessionOptions& session) {
  if (!shown() || progress_) return;
  session.output_sync = true;
  if (!options.history && !options.memory_history_path.empty())
    options.history = std::make_shared<detail::HistoryStore>(
        options.memory_history_path, detail::HistoryStoreOptions{}, options.warn);
  history_ = options.history;
  progress_ = std::make_shared<detail::BuildProgress>(options.history, 0,
                                                      detail::monotonic_ns());
  options.progress = progress_;
}

void StatusLine::begin(const std::string& top_dir, const std::vector<std::string>& targets) {
  if (!shown() || printer_) return;
  if (!progress_)
    throw std::logic_error("StatusLine::begin() before attach(): the pool has no progress");
  progress_->begin(detail::hash_targets(top_dir, targets), detail::monotonic_ns());
  const detail::StatusMode mode =
      mode_ == Mode::kLine ? detail::StatusMode::kLine : detail::StatusMode::kPlain;
  printer_ = std::make_unique<detail::StatusPrinter>(
      progress_, detail::status_printer_options(mode, fd_,
                                                detail::TerminalConventions::from_environment()));
  g_console_printer.store(printer_.get());
  detail::console::set_writer({&message_through_printer, &block_through_printer});
}

void StatusLine::expect(std::optional<std::size_t> commands) {
  if (progress_) progress_->set_expected_remaining(commands);
}

void StatusLine::expect_outputs(const std::vector<std::string>& paths) {
  if (!progress_) return;
  std::vector<std::uint64_t> keys;
  keys.reserve(paths.size());
  for (const std::string& path : paths) keys.push_back(detail::hash_output_path(path));
  progress_->expect_outputs(keys);
}

void StatusLine::print(int fd, std::string_view text) {
  if (printer_) {
    printer_->write(fd, text);
  } else {
    write_all(fd, text);
  }
}

void StatusLine::finish(bool interrupted) {
  if (!printer_) return;
  detail::console::set_writer({});
  g_console_printer.store(nullptr);
  printer_->finish(detail::monotonic_ns(), interrupted);
  printer_.reset();
  if (history_) history_->flush();  // the build's shape, recorded by that finish
}

}  // namespace spawnpool
