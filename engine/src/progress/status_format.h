// The text of the build's progress line (issue 18): one format for the terminal's status
// line and for the plain lines of logs and CI, which scripts parse:
//   [1,212/2,080 58%] 0:41 elapsed, ~0:29 left · 2 running, 1 waiting for memory · cc -c big.c (12s)
// It starts with "[DONE/TOTAL PCT%]", then the elapsed time and "~M:SS left" (or
// "~H:MM:SS left", or "no estimate yet"); the rest is for people and is cut first when
// the terminal is narrow. Pure functions: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spawnpool::detail {

/// What the line shows, taken from BuildProgress::snapshot().
struct StatusView {
  std::uint64_t done = 0;            ///< commands finished (failed ones too)
  std::uint64_t total = 0;           ///< commands the build is expected to run; >= done
  double elapsed_s = 0;              ///< since the build started
  std::optional<double> remaining_s; ///< the ETA; unset: "no estimate yet"
  std::uint64_t running = 0;
  std::uint64_t waiting_for_memory = 0;  ///< queued with a slot free, held by admission
  std::uint64_t waiting_for_token = 0;   ///< queued for a make jobserver token
  std::string longest_running;       ///< the line of the command running longest, or ""
  double longest_running_s = 0;
};

/// The line, at most `width` columns wide (0: no limit). `unicode`: separate the parts
/// with " · " (a UTF-8 locale), else " - ". Lines of commands are shown on one line
/// (newlines as spaces) and cut with "..." to fit.
std::string format_status(const StatusView& view, std::size_t width, bool unicode);

/// Columns `text` (UTF-8) takes on a terminal, one per code point.
std::size_t display_columns(std::string_view text);

/// "0:41", "12:05", "1:02:03": minutes and seconds, hours once there are any.
std::string format_clock(double seconds);

/// "1,212": the number with a comma between groups of three digits.
std::string group_thousands(std::uint64_t number);

/// Whether the C library's character type is UTF-8 (LC_ALL, LC_CTYPE, LANG, in that order).
bool locale_is_utf8();

}  // namespace spawnpool::detail
