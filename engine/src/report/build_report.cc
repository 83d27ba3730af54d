#include "engine/src/report/build_report.h"

#include "spawnpool/report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

namespace spawnpool::detail {

extern const char kReportTemplate[];  // report_template.html, embedded by CMake

namespace {

constexpr std::string_view kPlaceholder = "@SPAWNPOOL_TRACE@";

std::string_view trimmed(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return {};
  const auto last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

// A Chrome trace is a JSON object with traceEvents, or a bare array of events. This is
// a check of the shape, not a parse: the page parses, and says so if it cannot.
bool looks_like_trace(std::string_view text) {
  text = trimmed(text);
  if (text.empty()) return false;
  if (text.front() == '[') return text.back() == ']';
  return text.front() == '{' && text.back() == '}' &&
         text.find("\"traceEvents\"") != std::string_view::npos;
}

std::string errno_text(int number) { return std::strerror(number); }

}  // namespace

std::string render_build_report(std::string_view trace_json) {
  const std::string_view page(kReportTemplate);
  const auto at = page.find(kPlaceholder);
  std::string out;
  out.reserve(page.size() + trace_json.size() + trace_json.size() / 16);
  out.append(page.substr(0, at));
  for (const char c : trace_json) {
    if (c == '<') {
      out.append("\\u003c");
    } else {
      out.push_back(c);
    }
  }
  out.append(page.substr(at + kPlaceholder.size()));
  return out;
}

std::string write_build_report(const std::string& trace_path, const std::string& report_path) {
  std::ifstream in(trace_path, std::ios::binary);
  if (!in) return "cannot read the trace " + trace_path + ": " + errno_text(errno);
  std::ostringstream buffer;
  buffer << in.rdbuf();
  const std::string trace = buffer.str();
  if (!looks_like_trace(trace)) {
    return trace_path + " is not a Chrome trace (a JSON object with traceEvents)";
  }
  const std::string page = render_build_report(trace);
  const std::string temporary = report_path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return "cannot write " + temporary + ": " + errno_text(errno);
  std::size_t done = 0;
  while (done < page.size()) {
    const ssize_t n = ::write(fd, page.data() + done, page.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int number = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(temporary.c_str());
      return "cannot write " + temporary + ": " + errno_text(number);
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 || std::rename(temporary.c_str(), report_path.c_str()) != 0) {
    const int number = errno;
    ::unlink(temporary.c_str());
    return "cannot write " + report_path + ": " + errno_text(number);
  }
  return {};
}

}  // namespace spawnpool::detail

namespace spawnpool {

std::string write_report(const std::string& trace_path, const std::string& report_path) {
  return detail::write_build_report(trace_path, report_path);
}

}  // namespace spawnpool
