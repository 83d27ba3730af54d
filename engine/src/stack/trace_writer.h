// A build trace in Chrome's trace-event format (open it in Perfetto or chrome://tracing;
// the build report, engine/src/report, draws its page from it). The same file, event for
// event and field for field, as the Python trace.py wrote before it moved here:
//
// - one complete event ("ph": "X", cat "command") per command on the thread of its slot
//   (tid = slot), from the start of its launch to its reap (command_ns()); args: command,
//   returncode, user_time_s, system_time_s, max_rss_kb, queue_wait_ms (submit to
//   dispatch), pool_overhead_ms, and slot_wait_ms / local_slot_wait_ms /
//   jobserver_wait_ms for what the scheduler says it waited for (when it waited); a
//   failed command whose output was captured keeps it in `output` (its first 16000
//   characters); then the caller's extra args (the SCons plugin: targets and inputs);
// - a command that never started: an instant event ("ph": "i", "s": "p", tid 0) when it
//   was refused; args command, error, stage;
// - with memory admission (predicted_peak_bytes set): args peak_memory_mib,
//   memory_source, predicted_peak_mib, memory_wait_ms (and oom_retries, oom_killed after
//   an OOM kill); a counter event "memory in use" (predicted_MiB, measured_MiB) at the
//   dispatch; an OOM retry's instant event ("OOM kill: run again alone", cat memory) on
//   its slot where the second run started;
// - metadata: process_name (first), spawnpool_build with command_line (the build's, for
//   the report) and, at the first measured command, memory_mode; thread_name "slot N"
//   before a slot's first command.
//
// Times are microseconds from the writer's creation, on CLOCK_MONOTONIC as the results'.
// The file is valid JSON after every event, not only at the end: it is
// {"traceEvents":[ ...events... ],"displayTimeUnit":"ms"}, and each add() goes in with
// one pwritev() over the closing tail, carrying a new tail behind it. A build that fails,
// is interrupted or killed leaves a complete file; only a crash inside that one write
// (or of the machine) can cut it short. A write error (a full disk) never fails the
// build: the old tail is put back, tracing stops, and one message says so.
//
// Thread-safe: an event is built on the caller's thread without a lock; one lock orders
// the writes (and the little the writer remembers: the slots named, the memory mode).
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "spawnpool/result.h"

namespace spawnpool::detail {

class TraceWriter {
 public:
  /// A failed command's output kept in its event, at most (characters).
  static constexpr std::size_t kOutputCharacters = 16000;

  /// Creates or truncates `path` and writes the empty trace, process_name and, when
  /// `command_line` is not empty, the build's spawnpool_build event. Throws
  /// std::system_error (its errno) if the file cannot be opened or written.
  TraceWriter(const std::string& path, std::string_view process_name = "spawnpool",
              std::string_view command_line = {});
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// Records one command's result; `line`: its command line (the event's name and
  /// args.command). `extra_args`: more args for a command that ran, as JSON object
  /// members without the braces (`"targets":["a.o"],"inputs":["a.c"]`), or empty.
  void add(const Result& result, std::string_view line, std::string_view extra_args = {});
  /// Closes the file (idempotent); add() after it records nothing.
  void close();

  const std::string& path() const { return path_; }
  /// CLOCK_MONOTONIC nanoseconds at creation: time 0 of the trace.
  std::int64_t origin_ns() const { return origin_ns_; }
  /// The file's descriptor, -1 once closed or stopped (for tests that make it fail).
  int fd() const;

 private:
  void started_event(std::string& out, const Result& result, std::string_view line,
                     std::string_view extra_args) const;
  void unstarted_event(std::string& out, const Result& result, std::string_view line) const;
  void memory_events(std::string& out, const Result& result) const;
  void metadata_locked(std::string& out, const Result& result);
  void append_us(std::string& out, std::int64_t ns) const;
  void stop_locked();

  const std::string path_;
  const std::int64_t origin_ns_;
  const std::string pid_;           // this process's, as JSON
  mutable std::mutex mutex_;
  int fd_ = -1;
  std::int64_t end_ = 0;            // where the tail starts: the next event goes there
  bool first_ = true;
  bool memory_mode_written_ = false;
  std::set<int> slots_named_;
};

}  // namespace spawnpool::detail
