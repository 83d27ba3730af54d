// How much memory a pool's commands may use at once: the setting that turns memory-aware
// admission on (docs/features.md, "Memory-aware admission"). A value type; no threading
// concerns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spawnpool {

struct MemoryBudget {
  enum class Mode {
    kOff,    ///< no admission, no cgroups, no history: peaks from ru_maxrss (the default)
    kAuto,   ///< measured: min(the driver's cgroup limit - usage, MemAvailable) - a reserve
    kBytes,  ///< `bytes`, as given
  };
  Mode mode = Mode::kOff;
  std::uint64_t bytes = 0;  ///< kBytes: the budget (> 0)
  /// kAuto: memory kept out of the measured headroom; unset: a tenth of it, at least
  /// 64 MiB and at most 1 GiB.
  std::optional<std::uint64_t> reserve_bytes;

  static MemoryBudget off() { return {}; }
  static MemoryBudget automatic() { return {Mode::kAuto, 0, std::nullopt}; }
  static MemoryBudget of_bytes(std::uint64_t size) { return {Mode::kBytes, size, std::nullopt}; }
  bool enabled() const { return mode != Mode::kOff; }

  /// "off", "auto" or a size: bytes, or a number (a fraction too) with K, M, G or T
  /// (powers of 1024; "KiB", "KB", "k" alike). Unset when malformed, zero or too large.
  static std::optional<MemoryBudget> parse(std::string_view text);
  /// What parse() reads back: "off", "auto", or the size in bytes.
  std::string to_string() const;
};

}  // namespace spawnpool
