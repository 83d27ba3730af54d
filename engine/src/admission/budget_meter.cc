#include "engine/src/admission/budget_meter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>


namespace spawnpool::detail {
namespace {

constexpr std::uint64_t kMiB = std::uint64_t(1) << 20;
constexpr std::uint64_t kGiB = std::uint64_t(1) << 30;

std::string_view trim(std::string_view text) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);
  return text;
}

bool equals_lower(std::string_view text, std::string_view lower) {
  if (text.size() != lower.size()) return false;
  for (std::size_t i = 0; i < text.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(text[i])) != lower[i]) return false;
  return true;
}

// The multiplier a size suffix stands for; 0 if it is not one.
std::uint64_t suffix_multiplier(std::string_view suffix) {
  if (suffix.empty() || equals_lower(suffix, "b")) return 1;
  static constexpr const char* kUnits = "kmgt";
  const char unit = static_cast<char>(std::tolower(static_cast<unsigned char>(suffix[0])));
  const char* found = std::char_traits<char>::find(kUnits, 4, unit);
  if (!found) return 0;
  const std::string_view rest = suffix.substr(1);
  if (!rest.empty() && !equals_lower(rest, "b") && !equals_lower(rest, "ib")) return 0;
  return std::uint64_t(1) << (10 * (found - kUnits + 1));
}

}  // namespace

std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo) {
  constexpr std::string_view kField = "MemAvailable:";
  std::size_t at = meminfo.find(kField);
  while (at != std::string_view::npos && at != 0 && meminfo[at - 1] != '\n')
    at = meminfo.find(kField, at + 1);
  if (at == std::string_view::npos) return std::nullopt;
  std::size_t pos = at + kField.size();
  while (pos < meminfo.size() && meminfo[pos] == ' ') ++pos;
  std::uint64_t kib = 0;
  const std::size_t digits_start = pos;
  for (; pos < meminfo.size() && std::isdigit(static_cast<unsigned char>(meminfo[pos])); ++pos) {
    if (kib > (UINT64_MAX >> 10) / 10) return std::nullopt;
    kib = kib * 10 + static_cast<std::uint64_t>(meminfo[pos] - '0');
  }
  if (pos == digits_start || meminfo.substr(pos, 3) != " kB") return std::nullopt;
  return kib << 10;
}

std::optional<std::uint64_t> ProcMeminfo::available_bytes() {
  const std::optional<std::string> text = file_.read();
  return text ? parse_mem_available(*text) : std::nullopt;
}

std::optional<std::uint64_t> parse_memory_size(std::string_view text) {
  text = trim(text);
  std::size_t pos = 0;
  std::uint64_t whole = 0;
  for (; pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])); ++pos) {
    if (whole > UINT64_MAX / 10 - 9) return std::nullopt;
    whole = whole * 10 + static_cast<std::uint64_t>(text[pos] - '0');
  }
  const std::size_t whole_digits = pos;
  double fraction = 0, scale = 0.1;
  if (pos < text.size() && text[pos] == '.') {
    for (++pos; pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])); ++pos) {
      fraction += scale * (text[pos] - '0');
      scale /= 10;
    }
  }
  if (whole_digits == 0 && fraction == 0) return std::nullopt;
  const std::uint64_t multiplier = suffix_multiplier(trim(text.substr(pos)));
  if (multiplier == 0 || whole > UINT64_MAX / multiplier) return std::nullopt;
  return whole * multiplier + static_cast<std::uint64_t>(std::floor(fraction * static_cast<double>(multiplier)));
}

BudgetMeter::BudgetMeter(MemoryBudget setting, std::unique_ptr<CgroupMemorySource> cgroup,
                         std::unique_ptr<SystemMemorySource> system)
    : setting_(setting), cgroup_(std::move(cgroup)), system_(std::move(system)) {}

std::optional<std::uint64_t> BudgetMeter::measure() {
  if (!automatic()) return setting_.bytes;
  std::optional<std::uint64_t> headroom;
  if (cgroup_) {
    const CgroupMemorySource::Reading reading = cgroup_->read();
    if (reading.limit_bytes && *reading.limit_bytes < kNoLimit && reading.usage_bytes)
      headroom = *reading.limit_bytes - std::min(*reading.limit_bytes, *reading.usage_bytes);
  }
  if (system_) {
    const std::optional<std::uint64_t> available = system_->available_bytes();
    if (available) headroom = headroom ? std::min(*headroom, *available) : *available;
  }
  if (!headroom) return std::nullopt;
  const std::uint64_t reserve = setting_.reserve_bytes.value_or(default_reserve(*headroom));
  return *headroom > reserve ? *headroom - reserve : 0;
}

std::uint64_t BudgetMeter::default_reserve(std::uint64_t headroom_bytes) {
  // A tenth absorbs the prediction error of typical commands and the driver's own growth
  // between measurements; the floor keeps room for the driver in a small container, the
  // cap stops a large machine from idling gigabytes.
  return std::clamp<std::uint64_t>(headroom_bytes / 10, 64 * kMiB, kGiB);
}

}  // namespace spawnpool::detail

namespace spawnpool {

std::optional<MemoryBudget> MemoryBudget::parse(std::string_view text) {
  const std::string_view word = detail::trim(text);
  if (detail::equals_lower(word, "off")) return off();
  if (detail::equals_lower(word, "auto")) return automatic();
  const std::optional<std::uint64_t> bytes = detail::parse_memory_size(text);
  if (!bytes || *bytes == 0) return std::nullopt;  // 0 would mean "one at a time": say -j1
  return of_bytes(*bytes);
}

std::string MemoryBudget::to_string() const {
  switch (mode) {
    case Mode::kOff: return "off";
    case Mode::kAuto: return "auto";
    case Mode::kBytes: return std::to_string(bytes);
  }
  return "off";
}

}  // namespace spawnpool
