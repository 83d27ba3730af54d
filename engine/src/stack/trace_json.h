// The JSON the trace writer (trace_writer.h) builds its events with: strings escaped from
// bytes, numbers as the Python trace (json.dumps of round(x, n)) wrote them. Appends to a
// caller's buffer, so an event is built in one string without temporaries. Pure
// functions: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spawnpool::detail::json {

/// What a byte that is not part of valid UTF-8 becomes.
enum class Invalid {
  /// "\udcXX" per byte: what Python's surrogateescape made of it (a command line read as
  /// file-system text), so the bytes can be told apart.
  kSurrogateEscape,
  /// One U+FFFD per maximal invalid subpart, as bytes.decode('utf-8', 'replace').
  kReplace,
};

/// Appends `text` as a JSON string, quotes included: ", \ and control characters
/// escaped, valid UTF-8 kept as it is (but U+2028 and U+2029, escaped for JavaScript
/// readers), invalid bytes as `invalid` says.
void append_string(std::string& out, std::string_view text,
                   Invalid invalid = Invalid::kSurrogateEscape);

/// Appends `text` as append_string() does, cut to `max_characters` characters (its first
/// max_characters - 3 and "..." when longer): a title that fits a timeline's slice.
/// Characters as Python counted them in the file-system text (an invalid byte is one).
void append_title(std::string& out, std::string_view text, std::size_t max_characters);

/// Appends the first `max_characters` characters of `first` then `second` (read as one
/// text, UTF-8 with kReplace) as a JSON string; if there were more, the string ends in
/// "\n... (N more characters)" (trace.py's cut of a failed command's output).
void append_text_cut(std::string& out, std::string_view first, std::string_view second,
                     std::size_t max_characters);

void append_int(std::string& out, std::int64_t value);
/// `value` rounded to `decimals` places, written shortest (2000.0, 0.25, 1.125): the
/// number json.dumps(round(value, decimals)) writes.
void append_fixed(std::string& out, double value, int decimals);

}  // namespace spawnpool::detail::json
