#include "engine/src/stack/build_statistics.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace spawnpool::detail {
namespace {

std::int64_t monotonic_now_ns() {
  timespec now{};
  clock_gettime(CLOCK_MONOTONIC, &now);
  return std::int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
}

template <typename... Args>
std::string format(const char* pattern, Args... args) {
  char buffer[512];
  int length = std::snprintf(buffer, sizeof buffer, pattern, args...);
  if (length < 0) return {};
  if (static_cast<std::size_t>(length) < sizeof buffer) return std::string(buffer, length);
  std::string text(static_cast<std::size_t>(length) + 1, '\0');
  std::snprintf(&text[0], text.size(), pattern, args...);
  text.resize(static_cast<std::size_t>(length));
  return text;
}

std::string seconds(std::int64_t ns) { return format("%.3f s", static_cast<double>(ns) / 1e9); }

std::string per(std::int64_t ns, std::int64_t count) {
  if (count == 0) return "-";
  return format("%.3f ms", static_cast<double>(ns) / static_cast<double>(count) / 1e6);
}

std::string one_line(std::string line) {
  std::replace(line.begin(), line.end(), '\n', ' ');
  if (line.size() <= 160) return line;
  return line.substr(0, 157) + "...";
}

}  // namespace

std::int64_t command_ns(const Result& result) {
  return result.exited_ns - (result.launch_ns ? result.launch_ns : result.started_ns);
}

std::int64_t pool_overhead_ns(const Result& result) {
  return ((result.launch_ns ? result.launch_ns : result.started_ns) - result.dispatched_ns) +
         (result.completed_ns - result.exited_ns);
}

const char* memory_mode_name(MemorySource source) {
  switch (source) {
    case MemorySource::kCgroup: return "cgroup per command";
    case MemorySource::kCgroupSampled: return "cgroup per command, memory.current sampled";
    case MemorySource::kRusage: return "largest process (ru_maxrss)";
    case MemorySource::kNone: break;
  }
  return "";
}

const char* memory_source_name(MemorySource source) {
  switch (source) {
    case MemorySource::kCgroup: return "cgroup";
    case MemorySource::kCgroupSampled: return "cgroup_sampled";
    case MemorySource::kRusage: return "rusage";
    case MemorySource::kNone: break;
  }
  return "";
}

void BuildStatistics::note_slots(int slots) {
  std::lock_guard<std::mutex> lock(mutex_);
  slots_ = std::max(slots_, slots);
}

void BuildStatistics::add(const Result& result, const std::string& line) {
  if (!result.started()) {
    std::int64_t when = result.completed_ns ? result.completed_ns : monotonic_now_ns();
    std::lock_guard<std::mutex> lock(mutex_);
    add_unstarted_locked(when);
    return;
  }
  const std::int64_t wall = command_ns(result);
  std::lock_guard<std::mutex> lock(mutex_);
  ++commands_;
  if (result.returncode != 0) ++failed_;
  command_ns_ += wall;
  overhead_ns_ += pool_overhead_ns(result);
  queue_ns_ += result.dispatched_ns - result.submitted_ns;
  span_locked(result.submitted_ns, result.completed_ns);
  if (result.predicted_peak_bytes) add_memory_locked(result);
  const std::uint64_t seq = seq_++;
  // A min-heap: the shortest of the longest on top, replaced by a longer one.
  auto greater = [](const Longest& a, const Longest& b) {
    return std::make_pair(a.ns, a.seq) > std::make_pair(b.ns, b.seq);
  };
  if (longest_.size() < kLongest) {
    longest_.push_back(Longest{wall, seq, line});
    std::push_heap(longest_.begin(), longest_.end(), greater);
  } else if (wall > longest_.front().ns) {
    std::pop_heap(longest_.begin(), longest_.end(), greater);
    longest_.back() = Longest{wall, seq, line};
    std::push_heap(longest_.begin(), longest_.end(), greater);
  }
}

void BuildStatistics::add_memory_locked(const Result& result) {
  if (result.memory_wait_ns > 0) {
    ++delayed_;
    memory_wait_ns_ += result.memory_wait_ns;
  }
  if (memory_mode_.empty()) memory_mode_ = memory_mode_name(result.memory_source);
  oom_retries_ += result.oom_retries;
  oom_failed_ += result.oom_killed ? 1 : 0;
  const std::int64_t peak = result.peak_memory_bytes;
  if (peak > 0) {
    const std::int64_t error = std::llabs(result.predicted_peak_bytes - peak) * 100 / peak;
    if (errors_.empty()) errors_.assign(kErrorBuckets, 0);
    ++errors_[static_cast<std::size_t>(std::min<std::int64_t>(error, kErrorBuckets - 1))];
    ++predicted_;
    if (result.predicted_peak_bytes < peak) ++under_predicted_;
  }
}

void BuildStatistics::add_unstarted_locked(std::int64_t when_ns) {
  ++commands_;
  ++failed_;
  ++unstarted_;
  span_locked(when_ns, when_ns);
}

void BuildStatistics::span_locked(std::int64_t start_ns, std::int64_t end_ns) {
  if (!first_ns_ || start_ns < *first_ns_) first_ns_ = start_ns;
  if (!last_ns_ || end_ns > *last_ns_) last_ns_ = end_ns;
}

std::optional<int> BuildStatistics::prediction_error(double fraction) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_locked(fraction);
}

std::optional<int> BuildStatistics::error_locked(double fraction) const {
  if (predicted_ == 0) return std::nullopt;
  const std::int64_t rank = std::max<std::int64_t>(
      1, static_cast<std::int64_t>(std::ceil(static_cast<double>(predicted_) * fraction)));
  std::int64_t seen = 0;
  for (int percent = 0; percent < kErrorBuckets; ++percent) {
    seen += errors_[static_cast<std::size_t>(percent)];
    if (seen >= rank) return percent;
  }
  return kErrorBuckets - 1;
}

double BuildStatistics::build_wall_locked() const {
  if (!first_ns_) return 0.0;
  return static_cast<double>(*last_ns_ - *first_ns_) / 1e9;
}

double BuildStatistics::utilization_locked() const {
  const double wall = build_wall_locked();
  if (wall <= 0 || slots_ <= 0) return 0.0;
  return static_cast<double>(command_ns_) / 1e9 / (slots_ * wall);
}

StatisticsTotals BuildStatistics::totals() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return StatisticsTotals{slots_,       commands_, failed_,
                          unstarted_,   command_ns_, overhead_ns_,
                          queue_ns_,    build_wall_locked(), utilization_locked()};
}

std::vector<std::pair<double, std::string>> BuildStatistics::longest() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return longest_locked();
}

std::vector<std::pair<double, std::string>> BuildStatistics::longest_locked() const {
  std::vector<Longest> entries = longest_;
  std::sort(entries.begin(), entries.end(), [](const Longest& a, const Longest& b) {
    return std::make_pair(a.ns, a.seq) > std::make_pair(b.ns, b.seq);
  });
  std::vector<std::pair<double, std::string>> out;
  out.reserve(entries.size());
  for (const Longest& entry : entries) {
    out.emplace_back(static_cast<double>(entry.ns) / 1e9, entry.line);
  }
  return out;
}

std::string BuildStatistics::report(const std::string& prefix) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::int64_t ran = commands_ - unstarted_;
  std::string text = prefix + ": statistics\n";
  std::string failed = format("%lld failed", static_cast<long long>(failed_));
  if (unstarted_) failed += format(" (%lld did not start)", static_cast<long long>(unstarted_));
  text += format("  commands:           %lld run, ", static_cast<long long>(commands_)) +
          failed + "\n";
  text += "  command time:       total " + seconds(command_ns_) + ", mean " +
          per(command_ns_, ran) + "\n";
  text += "  pool overhead:      mean " + per(overhead_ns_, ran) +
          " per command (slot to launch + reap to result)\n";
  text += "  queue wait:         mean " + per(queue_ns_, ran) + " per command, total " +
          seconds(queue_ns_) + "\n";
  const double wall = build_wall_locked();
  const double utilization = utilization_locked();
  text += format("  slot utilization:   %.1f%% (%d slots, %.3f s from first submit to last "
                 "result)\n",
                 100 * utilization, slots_, wall);
  if (!memory_mode_.empty()) text += "  memory measured by: " + memory_mode_ + "\n";
  if (predicted_ || delayed_ || oom_retries_) {
    text += format("  delayed for memory: %lld commands, ", static_cast<long long>(delayed_)) +
            seconds(memory_wait_ns_) + " in all\n";
    text += format("  OOM retries:        %lld (%lld killed again when run alone)\n",
                   static_cast<long long>(oom_retries_), static_cast<long long>(oom_failed_));
    const std::optional<int> p50 = error_locked(0.5), p90 = error_locked(0.9);
    if (p50) {
      text += format("  prediction error:   p50 %d%%, p90 %d%% of the measured peak (%lld "
                     "commands, %lld under-predicted)\n",
                     *p50, *p90, static_cast<long long>(predicted_),
                     static_cast<long long>(under_predicted_));
    }
  }
  const auto longest = longest_locked();
  if (!longest.empty()) {
    text += "  longest commands:\n";
    for (const auto& [secs, line] : longest) {
      text += format("    %9.3f s  ", secs) + one_line(line) + "\n";
    }
  }
  return text;
}

}  // namespace spawnpool::detail
