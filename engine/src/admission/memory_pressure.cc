#include "engine/src/admission/memory_pressure.h"

#include <charconv>

namespace spawnpool::detail {

std::optional<double> parse_psi_some_avg10(std::string_view psi) {
  std::size_t line = 0;
  while (line < psi.size()) {
    std::size_t end = psi.find('\n', line);
    if (end == std::string_view::npos) end = psi.size();
    const std::string_view text = psi.substr(line, end - line);
    line = end + 1;
    if (text.rfind("some ", 0) != 0) continue;
    const std::size_t at = text.find(" avg10=");
    if (at == std::string_view::npos) return std::nullopt;
    const char* first = text.data() + at + 7;
    double value = 0;
    const auto [ptr, error] = std::from_chars(first, text.data() + text.size(), value);
    if (error != std::errc() || ptr == first || value < 0) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

std::optional<double> PsiFile::some_avg10() {
  const std::optional<std::string> text = file_.read();
  return text ? parse_psi_some_avg10(*text) : std::nullopt;
}

std::unique_ptr<PsiFile> open_memory_pressure(const std::string& cgroup_file) {
  if (!cgroup_file.empty()) {
    auto cgroup = std::make_unique<PsiFile>(cgroup_file);
    if (cgroup->some_avg10()) return cgroup;
  }
  auto system = std::make_unique<PsiFile>("/proc/pressure/memory");
  if (system->some_avg10()) return system;
  return nullptr;
}

PressureGate::PressureGate(std::unique_ptr<PressureSource> source, PressureThresholds thresholds)
    : source_(std::move(source)), thresholds_(thresholds) {}

bool PressureGate::paused(std::int64_t now_ns) {
  if (!source_) return false;
  if (polled_ && now_ns - last_poll_ns_ < thresholds_.poll_interval_ns) return paused_;
  polled_ = true;
  last_poll_ns_ = now_ns;
  last_avg10_ = source_->some_avg10();
  // Two thresholds, so that a reading hovering around one does not switch admissions on
  // and off at every poll.
  const bool pause = last_avg10_ && (paused_ ? *last_avg10_ >= thresholds_.resume_below
                                             : *last_avg10_ > thresholds_.pause_above);
  if (pause && !paused_) {
    ++pauses_;
    paused_since_ns_ = now_ns;
  } else if (!pause && paused_) {
    paused_total_ns_ += now_ns - paused_since_ns_;
  }
  paused_ = pause;
  return paused_;
}

std::optional<std::int64_t> PressureGate::next_poll_ns() const {
  if (!source_) return std::nullopt;
  return polled_ ? last_poll_ns_ + thresholds_.poll_interval_ns : 0;
}

std::int64_t PressureGate::paused_ns(std::int64_t now_ns) const {
  return paused_total_ns_ + (paused_ ? now_ns - paused_since_ns_ : 0);
}

}  // namespace spawnpool::detail
