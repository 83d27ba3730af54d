// Measuring the memory budget the admission policy fills (spawnpool::MemoryBudget says
// which): an explicit size, or `auto`, the smaller of the driver's cgroup headroom
// (limit minus usage) and the kernel's MemAvailable, minus a reserve. The sources are interfaces (fakes in tests; the cgroup
// one comes from the cgroup layer). Not thread-safe: the policy calls it under the
// scheduler's lock; measure() reads files and is called at a bounded rate.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/src/admission/memory_proc_file.h"
#include "spawnpool/memory_budget.h"

namespace spawnpool::detail {

/// The driver's memory cgroup, as the cgroup layer finds it (v1 memory.limit_in_bytes /
/// memory.usage_in_bytes, v2 memory.max / memory.current).
class CgroupMemorySource {
 public:
  struct Reading {
    std::optional<std::uint64_t> limit_bytes;  ///< unset: no limit ("max", or v1's huge value)
    std::optional<std::uint64_t> usage_bytes;  ///< unset: unreadable
  };
  virtual ~CgroupMemorySource() = default;
  /// Reads both values now. Should report the tightest limit on the way to the root
  /// (limit minus usage of whichever ancestor has the least headroom), as that one binds.
  virtual Reading read() = 0;
};

/// The machine's available memory.
class SystemMemorySource {
 public:
  virtual ~SystemMemorySource() = default;
  /// MemAvailable in bytes now; unset when unknown.
  virtual std::optional<std::uint64_t> available_bytes() = 0;
};

/// `MemAvailable` from a meminfo-format text, in bytes; unset if absent or malformed.
std::optional<std::uint64_t> parse_mem_available(std::string_view meminfo);

/// SystemMemorySource reading /proc/meminfo (or another file of that format, for tests).
class ProcMeminfo : public SystemMemorySource {
 public:
  explicit ProcMeminfo(std::string path = "/proc/meminfo") : file_(std::move(path)) {}
  std::optional<std::uint64_t> available_bytes() override;

 private:
  ProcFile file_;
};

/// A size as users write it: bytes, or a number (may have a fraction) with K, M, G or T
/// (powers of 1024; "KiB", "KB", "k" too). Unset when malformed or too large.
std::optional<std::uint64_t> parse_memory_size(std::string_view text);

class BudgetMeter {
 public:
  /// A limit at or above this (v1 reports "no limit" as about 2^63) counts as none.
  static constexpr std::uint64_t kNoLimit = std::uint64_t(1) << 60;

  /// `setting` is kAuto or kBytes. Either source may be null (not available here).
  BudgetMeter(MemoryBudget setting, std::unique_ptr<CgroupMemorySource> cgroup,
              std::unique_ptr<SystemMemorySource> system);

  /// The budget now: the explicit size, or for `auto` min(cgroup limit - usage,
  /// MemAvailable) - reserve (0 if the reserve takes it all). Unset when `auto` has no
  /// source that answers: then only memory pressure limits admission.
  std::optional<std::uint64_t> measure();

  bool automatic() const { return setting_.mode == MemoryBudget::Mode::kAuto; }

  /// The reserve for a measured headroom: 1/10 of it, at least 64 MiB and at most 1 GiB.
  static std::uint64_t default_reserve(std::uint64_t headroom_bytes);

 private:
  MemoryBudget setting_;
  std::unique_ptr<CgroupMemorySource> cgroup_;
  std::unique_ptr<SystemMemorySource> system_;
};

}  // namespace spawnpool::detail
