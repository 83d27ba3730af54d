// The build report (issue 18): one self-contained HTML page drawn from a build's Chrome
// trace (engine/src/stack/trace_writer.h): the slots' timeline, parallelism and
// memory over time, the longest commands, the waits, the failed commands and the
// critical path. The page (report_template.html, compiled in) computes everything from
// the trace in the browser; this side only puts the trace into it, safely. Pure
// functions and one file write: thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace spawnpool::detail {

/// The report page with `trace_json` in it. The JSON is embedded as it is, except that
/// every "<" becomes "\u003c" (in valid JSON "<" only occurs inside strings, where the
/// escape means the same), so no content can end the script element that holds it.
std::string render_build_report(std::string_view trace_json);

/// Reads the trace at `trace_path` and writes its report to `report_path` (replaced
/// whole: written beside it, then renamed). Returns "" on success, else a sentence
/// saying what failed (an unreadable trace, a file that is not a trace, a write error).
std::string write_build_report(const std::string& trace_path, const std::string& report_path);

}  // namespace spawnpool::detail
