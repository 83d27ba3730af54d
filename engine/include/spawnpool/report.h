// The build report for a C++ driver (issue 18): one self-contained HTML page (no network)
// drawn from the build's Chrome trace (SessionOptions::trace_path): the slots' timeline,
// parallelism and memory over time, the longest commands, the waits, the failed commands
// with their output, the critical path. What `spawnpool report TRACE -o FILE` and the
// `--report=FILE` option write. Thread-safe.
#pragma once

#include <string>

namespace spawnpool {

/// Writes the report of the trace at `trace_path` (closed: Session::finish()) to
/// `report_path` (replaced whole). Returns "" on success, else a sentence saying what
/// failed (an unreadable trace, a file that is not a trace, a write error).
std::string write_report(const std::string& trace_path, const std::string& report_path);

}  // namespace spawnpool
