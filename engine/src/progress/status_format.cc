#include "engine/src/progress/status_format.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace spawnpool::detail {

namespace {

// Columns a UTF-8 string takes, counting each code point as one (the line holds
// command lines, which are almost always ASCII; wide characters are rare enough that a
// cut one column short of the edge is the worst case).
std::size_t columns(std::string_view text) {
  std::size_t n = 0;
  for (const unsigned char c : text) n += (c & 0xC0) != 0x80;
  return n;
}

// The first `width` columns of `text`, cut with "..." when it is longer.
std::string fit(std::string_view text, std::size_t width) {
  if (columns(text) <= width) return std::string(text);
  if (width <= 3) return std::string(width, '.');
  std::string out;
  std::size_t n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c & 0xC0) != 0x80) {
      if (n == width - 3) break;
      ++n;
    }
    out.push_back(text[i]);
  }
  return out + "...";
}

std::string one_line(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return out;
}

}  // namespace

std::size_t display_columns(std::string_view text) { return columns(text); }

std::string format_clock(double seconds) {
  const auto whole = static_cast<std::uint64_t>(seconds > 0 ? std::llround(seconds) : 0);
  const auto h = whole / 3600, m = whole / 60 % 60, s = whole % 60;
  char buffer[48];
  if (h > 0) {
    std::snprintf(buffer, sizeof buffer, "%llu:%02llu:%02llu", static_cast<unsigned long long>(h),
                  static_cast<unsigned long long>(m), static_cast<unsigned long long>(s));
  } else {
    std::snprintf(buffer, sizeof buffer, "%llu:%02llu", static_cast<unsigned long long>(m),
                  static_cast<unsigned long long>(s));
  }
  return buffer;
}

std::string group_thousands(std::uint64_t number) {
  std::string digits = std::to_string(number);
  for (std::size_t i = digits.size(); i > 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

bool locale_is_utf8() {
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    const std::string_view v(value);
    return v.find("UTF-8") != std::string_view::npos || v.find("utf8") != std::string_view::npos ||
           v.find("utf-8") != std::string_view::npos || v.find("UTF8") != std::string_view::npos;
  }
  return false;
}

std::string format_status(const StatusView& view, std::size_t width, bool unicode) {
  const std::uint64_t total = view.total < view.done ? view.done : view.total;
  const unsigned percent =
      total == 0 ? 0 : static_cast<unsigned>(view.done * 100 / total);  // 100% only when done
  std::string head = "[" + group_thousands(view.done) + "/" + group_thousands(total) + " " +
                     std::to_string(percent) + "%] " + format_clock(view.elapsed_s) +
                     " elapsed, ";
  head += view.remaining_s ? "~" + format_clock(*view.remaining_s) + " left" : "no estimate yet";

  const std::string separator = unicode ? " \u00b7 " : " - ";
  std::string activity = std::to_string(view.running) + " running";
  if (view.waiting_for_memory) {
    activity += ", " + std::to_string(view.waiting_for_memory) + " waiting for memory";
  }
  if (view.waiting_for_token) {
    activity += ", " + std::to_string(view.waiting_for_token) + " waiting for a job token";
  }
  std::string line = head + separator + activity;
  if (!view.longest_running.empty()) {
    const std::string clock = " (" + std::to_string(static_cast<long long>(view.longest_running_s)) + "s)";
    const std::size_t used = columns(line) + columns(separator) + columns(clock);
    const std::size_t room = width == 0 ? std::string::npos : (width > used ? width - used : 0);
    if (room >= 12) {  // a command cut shorter than this says nothing
      line += separator + fit(one_line(view.longest_running), room) + clock;
    }
  }
  if (width != 0 && columns(line) > width) {
    line = columns(head) <= width ? head : fit(head, width);
  }
  return line;
}

}  // namespace spawnpool::detail
