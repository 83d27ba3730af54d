// The trace a build's session records and the report drawn from it (SessionOptions:
// trace_path, report_path): the trace asked for, or, for a report alone, one in a
// temporary file that is unlinked as soon as it is open, so that no way the driver ends
// (an exception, an early return, SIGKILL) leaves it behind; finish() closes the trace
// and writes the report. Every problem (a file that cannot be written, no temporary
// directory) is one warning, and the build goes on without what failed.
//
// Threading: made, finished and destroyed by the session's thread while no command runs;
// the trace itself is written from any thread (trace_writer.h).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "engine/src/stack/trace_writer.h"
#include "spawnpool/session.h"

namespace spawnpool::detail {

class TraceRecording {
 public:
  using Warn = std::function<void(const std::string&)>;

  /// Opens the trace of `options` (none when neither a trace nor a report is asked for).
  /// `warn` gets each problem as one sentence, on this thread and in finish().
  TraceRecording(const spawnpool::SessionOptions& options, Warn warn);
  ~TraceRecording();
  TraceRecording(const TraceRecording&) = delete;
  TraceRecording& operator=(const TraceRecording&) = delete;

  /// The trace being recorded, or null.
  const std::shared_ptr<TraceWriter>& trace() const { return trace_; }
  /// Closes the trace and writes the report from it (idempotent).
  void finish();

 private:
  void open_temporary(const spawnpool::SessionOptions& options);

  Warn warn_;
  std::string report_flag_;        // the report's option as the front end spells it
  std::string report_path_;        // "": no report (none asked for, or no trace for it)
  std::shared_ptr<TraceWriter> trace_;
  int temporary_fd_ = -1;          // the unlinked temporary trace, read for the report
};

}  // namespace spawnpool::detail
