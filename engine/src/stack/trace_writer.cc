#include "engine/src/stack/trace_writer.h"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "engine/src/command/console.h"
#include "engine/src/stack/build_statistics.h"
#include "engine/src/stack/trace_json.h"
#include "worker_pool/protocol/monotonic_clock.h"

namespace spawnpool::detail {
namespace {

constexpr std::string_view kHead = "{\"traceEvents\":[";
constexpr std::string_view kTail = "\n],\"displayTimeUnit\":\"ms\"}\n";
constexpr std::size_t kTitleCharacters = 80;  // a slice's title: what a timeline shows
constexpr double kMiB = 1 << 20;

void append_ms(std::string& out, std::int64_t ns) { json::append_fixed(out, static_cast<double>(ns) / 1e6, 3); }
void append_mib(std::string& out, std::int64_t bytes) {
  json::append_fixed(out, static_cast<double>(bytes) / kMiB, 1);
}

// `,"name":` then the value's caller appends it.
void key(std::string& out, std::string_view name) {
  out.append(",\"").append(name).append("\":");
}

std::string pid_text() {
  std::string out;
  json::append_int(out, ::getpid());
  return out;
}

// A metadata event ("ph": "M") on `tid` whose args are `args` (JSON members).
void metadata(std::string& out, std::string_view pid, std::string_view name, int tid,
              std::string_view args) {
  out.append(",\n{\"name\":\"").append(name).append("\",\"ph\":\"M\",\"pid\":").append(pid);
  out.append(",\"tid\":");
  json::append_int(out, tid);
  out.append(",\"args\":{").append(args).append("}}");
}

// Writes `count` parts at `offset` in one pwritev() (a short one goes on from where it
// stopped: its error, if any, is the next call's errno).
bool write_all_at(int fd, iovec* parts, int count, std::int64_t offset) {
  while (count > 0) {
    const ssize_t n = ::pwritev(fd, parts, count, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {
      errno = ENOSPC;
      return false;
    }
    offset += n;
    for (std::size_t left = static_cast<std::size_t>(n); count > 0 && left >= parts->iov_len;) {
      left -= parts->iov_len;
      ++parts;
      --count;
      if (count > 0 && left < parts->iov_len) {
        parts->iov_base = static_cast<char*>(parts->iov_base) + left;
        parts->iov_len -= left;
        break;
      }
    }
  }
  return true;
}

// The event of each add(), built on the caller's thread: kept per thread so that its
// capacity is reused from command to command.
thread_local std::string t_events;

}  // namespace

TraceWriter::TraceWriter(const std::string& path, std::string_view process_name,
                         std::string_view command_line)
    : path_(path), origin_ns_(monotonic_ns()), pid_(pid_text()) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd_ < 0) throw std::system_error(errno, std::generic_category(), path);
  std::string events, args = "\"name\":";
  json::append_string(args, process_name);
  metadata(events, pid_, "process_name", 0, args);
  if (!command_line.empty()) {
    args = "\"command_line\":";
    json::append_string(args, command_line);
    metadata(events, pid_, "spawnpool_build", 0, args);
  }
  // The first event follows the head without a comma.
  const std::string_view body = std::string_view(events).substr(1);
  iovec parts[] = {{const_cast<char*>(kHead.data()), kHead.size()},
                   {const_cast<char*>(body.data()), body.size()},
                   {const_cast<char*>(kTail.data()), kTail.size()}};
  if (!write_all_at(fd_, parts, 3, 0)) {
    const int error = errno;
    ::close(fd_);
    throw std::system_error(error, std::generic_category(), path);
  }
  end_ = static_cast<std::int64_t>(kHead.size() + body.size());
}

TraceWriter::~TraceWriter() { close(); }

void TraceWriter::close() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

int TraceWriter::fd() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return fd_;
}

void TraceWriter::append_us(std::string& out, std::int64_t ns) const {
  json::append_fixed(out, static_cast<double>(ns - origin_ns_) / 1000.0, 3);
}

void TraceWriter::add(const Result& result, std::string_view line, std::string_view extra_args) {
  std::string& events = t_events;
  events.clear();
  if (result.started()) {
    started_event(events, result, line, extra_args);
  } else {
    unstarted_event(events, result, line);
  }
  std::string problem;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fd_ < 0) return;
    std::string meta;  // empty (no allocation) but for a new slot or the memory mode
    if (result.started()) metadata_locked(meta, result);
    iovec parts[] = {{meta.data(), meta.size()},
                     {events.data(), events.size()},
                     {const_cast<char*>(kTail.data()), kTail.size()}};
    const std::size_t body = meta.size() + events.size();
    if (write_all_at(fd_, parts, 3, end_)) {
      end_ += static_cast<std::int64_t>(body);
      return;
    }
    const int error = errno;
    stop_locked();
    problem = "spawnpool: trace " + path_ + ": " + std::strerror(error) + "; tracing stopped\n";
  }
  console::message(problem);  // without the lock: the console may wait for its own
}

// A full disk must not fail the build: the old tail goes back where it was (those bytes
// exist, so this needs no new space), the file ends after it, tracing stops.
void TraceWriter::stop_locked() {
  if (::pwrite(fd_, kTail.data(), kTail.size(), end_) == static_cast<ssize_t>(kTail.size())) {
    if (::ftruncate(fd_, end_ + static_cast<std::int64_t>(kTail.size())) != 0) {
      // Nothing more to do: the file holds a valid trace up to the tail already.
    }
  }
  ::close(fd_);
  fd_ = -1;
}

void TraceWriter::metadata_locked(std::string& out, const Result& result) {
  if (result.predicted_peak_bytes && !memory_mode_written_) {
    const std::string_view mode = memory_mode_name(result.memory_source);
    if (!mode.empty()) {
      memory_mode_written_ = true;
      std::string args = "\"memory_mode\":";
      json::append_string(args, mode);
      metadata(out, pid_, "spawnpool_build", 0, args);
    }
  }
  if (slots_named_.insert(result.slot).second) {
    std::string args = "\"name\":\"slot ";
    json::append_int(args, result.slot);
    args.push_back('"');
    metadata(out, pid_, "thread_name", result.slot, args);
  }
}

void TraceWriter::started_event(std::string& out, const Result& r, std::string_view line,
                                std::string_view extra_args) const {
  out.append(",\n{\"name\":");
  json::append_title(out, line, kTitleCharacters);
  out.append(",\"cat\":\"command\",\"ph\":\"X\",\"pid\":").append(pid_);
  key(out, "tid");
  json::append_int(out, r.slot);
  key(out, "ts");
  append_us(out, r.launch_ns ? r.launch_ns : r.started_ns);
  key(out, "dur");
  json::append_fixed(out, static_cast<double>(command_ns(r)) / 1000.0, 3);
  out.append(",\"args\":{\"command\":");
  json::append_string(out, line);
  key(out, "returncode");
  json::append_int(out, r.returncode);
  key(out, "user_time_s");
  json::append_fixed(out, r.user_time, 6);
  key(out, "system_time_s");
  json::append_fixed(out, r.system_time, 6);
  key(out, "max_rss_kb");
  json::append_int(out, r.max_rss_kb);
  key(out, "queue_wait_ms");
  append_ms(out, r.dispatched_ns - r.submitted_ns);
  key(out, "pool_overhead_ms");
  append_ms(out, pool_overhead_ns(r));
  // What the scheduler says it waited for, each only when it waited.
  const std::pair<const char*, std::int64_t> waits[] = {
      {"slot_wait_ms", r.slot_wait_ns},
      {"local_slot_wait_ms", r.local_slot_wait_ns},
      {"jobserver_wait_ms", r.jobserver_wait_ns}};
  for (const auto& [name, ns] : waits) {
    if (!ns) continue;
    key(out, name);
    append_ms(out, ns);
  }
  if (r.returncode != 0 && r.captured) {
    key(out, "output");
    json::append_text_cut(out, r.stdout_data, r.stderr_data, kOutputCharacters);
  }
  if (!extra_args.empty()) out.append(",").append(extra_args);
  if (r.predicted_peak_bytes) {
    key(out, "peak_memory_mib");
    append_mib(out, r.peak_memory_bytes);
    key(out, "memory_source");
    const std::string_view source = memory_source_name(r.memory_source);
    if (source.empty()) out.append("null");
    else json::append_string(out, source);
    key(out, "predicted_peak_mib");
    append_mib(out, r.predicted_peak_bytes);
    key(out, "memory_wait_ms");
    append_ms(out, r.memory_wait_ns);
    if (r.oom_retries || r.oom_killed) {
      key(out, "oom_retries");
      json::append_int(out, r.oom_retries);
      key(out, "oom_killed");
      out.append(r.oom_killed ? "true" : "false");
    }
  }
  out.append("}}");
  if (r.predicted_peak_bytes) memory_events(out, r);
}

void TraceWriter::memory_events(std::string& out, const Result& r) const {
  out.append(",\n{\"name\":\"memory in use\",\"ph\":\"C\",\"pid\":").append(pid_);
  key(out, "ts");
  append_us(out, r.dispatched_ns);
  out.append(",\"args\":{\"predicted_MiB\":");
  append_mib(out, r.predicted_in_use_bytes);
  key(out, "measured_MiB");
  append_mib(out, r.measured_in_use_bytes);
  out.append("}}");
  if (!r.oom_retries) return;
  out.append(",\n{\"name\":\"OOM kill: run again alone\",\"cat\":\"memory\",\"ph\":\"i\","
             "\"s\":\"t\",\"pid\":").append(pid_);
  key(out, "tid");
  json::append_int(out, r.slot);
  key(out, "ts");
  append_us(out, r.started_ns);
  out.append("}");
}

void TraceWriter::unstarted_event(std::string& out, const Result& r, std::string_view line) const {
  out.append(",\n{\"name\":");
  json::append_title(out, line, kTitleCharacters);
  out.append(",\"cat\":\"command\",\"ph\":\"i\",\"s\":\"p\",\"pid\":").append(pid_);
  out.append(",\"tid\":0,\"ts\":");
  append_us(out, r.completed_ns ? r.completed_ns : monotonic_ns());
  out.append(",\"args\":{\"command\":");
  json::append_string(out, line);
  key(out, "error");
  json::append_string(out, r.error_message);
  key(out, "stage");
  json::append_string(out, stage_name(r.failure));
  out.append("}}");
}

}  // namespace spawnpool::detail
