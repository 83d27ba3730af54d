#include "engine/src/stack/trace_recording.h"

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <utility>

#include "engine/src/report/build_report.h"

namespace spawnpool::detail {
namespace {

// Where the temporary trace goes: $TMPDIR, as mkstemp's callers do, else /tmp.
std::string temporary_directory() {
  const char* dir = std::getenv("TMPDIR");
  return dir != nullptr && *dir != '\0' ? dir : "/tmp";
}

}  // namespace

TraceRecording::TraceRecording(const spawnpool::SessionOptions& options, Warn warn)
    : warn_(std::move(warn)), report_flag_(options.option_prefix + "report") {
  report_path_ = options.report_path;
  if (options.trace_path.empty()) {
    if (!report_path_.empty()) open_temporary(options);
    return;
  }
  try {
    trace_ = std::make_shared<TraceWriter>(options.trace_path, options.trace_process_name,
                                           options.trace_command_line);
  } catch (const std::system_error& e) {
    warn_(options.option_prefix + "trace: cannot write " + options.trace_path + ": " +
          std::strerror(e.code().value()) + (report_path_.empty() ? "" : "; no report either"));
    report_path_.clear();
  }
}

// The file is unlinked once the writer has it open: its name exists for microseconds, and
// the report reads it through the descriptor kept here (/proc/self/fd), so nothing is
// left to remove at the end, however the driver ends.
void TraceRecording::open_temporary(const spawnpool::SessionOptions& options) {
  const std::string dir = temporary_directory();
  std::string path = dir + "/spawnpool-trace-XXXXXX.json";
  temporary_fd_ = ::mkstemps(path.data(), 5);
  if (temporary_fd_ < 0) {
    warn_(report_flag_ + ": cannot record the build in " + dir + ": " + std::strerror(errno));
    report_path_.clear();
    return;
  }
  ::fcntl(temporary_fd_, F_SETFD, FD_CLOEXEC);  // no command inherits it
  try {
    trace_ = std::make_shared<TraceWriter>(path, options.trace_process_name,
                                           options.trace_command_line);
  } catch (const std::system_error& e) {
    warn_(report_flag_ + ": cannot record the build in " + dir + ": " +
          std::strerror(e.code().value()));
    report_path_.clear();
  }
  ::unlink(path.c_str());
  if (!trace_) {
    ::close(temporary_fd_);
    temporary_fd_ = -1;
  }
}

TraceRecording::~TraceRecording() {
  if (temporary_fd_ >= 0) ::close(temporary_fd_);
}

void TraceRecording::finish() {
  if (!trace_) return;
  trace_->close();
  if (!report_path_.empty()) {
    const std::string source = temporary_fd_ >= 0
                                   ? "/proc/self/fd/" + std::to_string(temporary_fd_)
                                   : trace_->path();
    const std::string problem = write_build_report(source, report_path_);
    if (!problem.empty()) warn_(report_flag_ + ": " + problem);
    report_path_.clear();
  }
  if (temporary_fd_ >= 0) {
    ::close(temporary_fd_);
    temporary_fd_ = -1;
  }
}

}  // namespace spawnpool::detail
