#include "engine/src/stack/trace_json.h"

#include <charconv>
#include <cstdio>

namespace spawnpool::detail::json {
namespace {

constexpr char kHex[] = "0123456789abcdef";

struct Sequence {
  std::size_t length;  // bytes: of the character, or of the maximal invalid subpart
  bool valid;
};

// The UTF-8 sequence at `i` of a text of `n` bytes read through `byte(i)`, by the rules
// of Python's decoder (no overlongs, no surrogates, nothing past U+10FFFF), which are
// Unicode's: an invalid sequence is as long as its longest valid start (at least 1).
template <typename Byte>
Sequence sequence_at(const Byte& byte, std::size_t i, std::size_t n) {
  const unsigned char lead = byte(i);
  if (lead < 0x80) return {1, true};
  std::size_t length;
  unsigned char low = 0x80, high = 0xbf;  // the second byte's range
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return {1, false};
  }
  for (std::size_t k = 1; k < length; ++k) {
    if (i + k >= n) return {k, false};
    const unsigned char c = byte(i + k);
    if (k == 1 ? (c < low || c > high) : (c < 0x80 || c > 0xbf)) return {k, false};
  }
  return {length, true};
}

void append_escape(std::string& out, unsigned code) {
  const char escape[6] = {'\\', 'u', kHex[(code >> 12) & 15], kHex[(code >> 8) & 15],
                          kHex[(code >> 4) & 15], kHex[code & 15]};
  out.append(escape, 6);
}

// Appends the sequence at `i` (`s` long) escaped for a JSON string.
template <typename Byte>
void append_sequence(std::string& out, const Byte& byte, std::size_t i, Sequence s,
                     Invalid invalid) {
  if (!s.valid) {
    if (invalid == Invalid::kReplace) {
      out.append("\\ufffd");
    } else {
      for (std::size_t k = 0; k < s.length; ++k) append_escape(out, 0xdc00u | byte(i + k));
    }
    return;
  }
  const unsigned char c = byte(i);
  if (s.length == 1) {
    switch (c) {
      case '"': out.append("\\\""); return;
      case '\\': out.append("\\\\"); return;
      case '\n': out.append("\\n"); return;
      case '\r': out.append("\\r"); return;
      case '\t': out.append("\\t"); return;
      case '\b': out.append("\\b"); return;
      case '\f': out.append("\\f"); return;
      default:
        if (c < 0x20) append_escape(out, c);
        else out.push_back(static_cast<char>(c));
        return;
    }
  }
  // U+2028 and U+2029 (e2 80 a8, e2 80 a9): valid JSON, but line ends to JavaScript.
  if (s.length == 3 && c == 0xe2 && byte(i + 1) == 0x80 && (byte(i + 2) | 1) == 0xa9) {
    append_escape(out, 0x2000u | (byte(i + 2) == 0xa8 ? 0x28u : 0x29u));
    return;
  }
  for (std::size_t k = 0; k < s.length; ++k) out.push_back(static_cast<char>(byte(i + k)));
}

bool plain(unsigned char c) { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\'; }

}  // namespace

void append_string(std::string& out, std::string_view text, Invalid invalid) {
  out.push_back('"');
  const auto byte = [text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const std::size_t n = text.size();
  std::size_t i = 0;
  while (i < n) {
    std::size_t run = i;  // the common case: a run of plain ASCII, appended at once
    while (run < n && plain(byte(run))) ++run;
    out.append(text.data() + i, run - i);
    i = run;
    if (i == n) break;
    const Sequence s = sequence_at(byte, i, n);
    append_sequence(out, byte, i, s, invalid);
    i += s.length;
  }
  out.push_back('"');
}

void append_title(std::string& out, std::string_view text, std::size_t max_characters) {
  if (text.size() > max_characters) {  // more bytes than characters allowed: count them
    const auto byte = [text](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    std::size_t i = 0, characters = 0, cut = 0;
    while (i < text.size() && characters <= max_characters) {
      const Sequence s = sequence_at(byte, i, text.size());
      // An invalid subpart is one character per byte (surrogateescape).
      const std::size_t count = s.valid ? 1 : s.length;
      for (std::size_t k = 0; k < count; ++k) {
        if (characters + k == max_characters - 3) cut = s.valid ? i : i + k;
      }
      characters += count;
      i += s.length;
    }
    if (characters > max_characters) {
      append_string(out, text.substr(0, cut));
      out.insert(out.size() - 1, "...");
      return;
    }
  }
  append_string(out, text);
}

void append_text_cut(std::string& out, std::string_view first, std::string_view second,
                     std::size_t max_characters) {
  // Read as one text without joining them: a character may start in `first` and end in
  // `second`, as in the bytes the Python trace joined before decoding.
  const auto byte = [first, second](std::size_t i) {
    return static_cast<unsigned char>(i < first.size() ? first[i] : second[i - first.size()]);
  };
  const std::size_t n = first.size() + second.size();
  out.push_back('"');
  std::size_t i = 0, characters = 0;
  for (; i < n && characters < max_characters; ++characters) {
    const Sequence s = sequence_at(byte, i, n);
    append_sequence(out, byte, i, s, Invalid::kReplace);
    i += s.length;
  }
  if (i < n) {
    std::size_t more = 0;
    for (; i < n; ++more) i += sequence_at(byte, i, n).length;
    out.append("\\n... (");
    append_int(out, static_cast<std::int64_t>(more));
    out.append(" more characters)");
  }
  out.push_back('"');
}

void append_int(std::string& out, std::int64_t value) {
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out.append(digits, static_cast<std::size_t>(end - digits));
}

void append_fixed(std::string& out, double value, int decimals) {
  char digits[64];
  int length = std::snprintf(digits, sizeof digits, "%.*f", decimals, value);
  if (length <= 0 || length >= static_cast<int>(sizeof digits)) {  // huge: no trace value is
    out.append("0.0");
    return;
  }
  if (decimals > 0) {  // trailing zeros go, one digit after the point stays
    while (digits[length - 1] == '0' && digits[length - 2] != '.') --length;
  } else {
    digits[length++] = '.';
    digits[length++] = '0';
  }
  out.append(digits, static_cast<std::size_t>(length));
}

}  // namespace spawnpool::detail::json
