// What the history held when the pool started: peak memory and duration per command,
// in hash maps, so that a prediction costs one lookup and no SQLite call. Built once (by
// HistoryStore), then read-only: safe to read from any thread once built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace spawnpool::detail {

/// One command's record: what it took the last times it ran.
struct HistoryEntry {
  std::int64_t peak_bytes = 0;   ///< the decayed maximum of its measured peaks (> 0)
  std::int64_t duration_ns = 0;  ///< wall time of its last run
};

class HistorySnapshot {
 public:
  /// Adds a command's record, last used at `used_at_ms`. For a fallback key shared by
  /// several commands, the most recently used one stays (on a tie, the later added).
  /// `fallback_key` 0: the command has none.
  void add(std::uint64_t exact_key, std::uint64_t fallback_key, const HistoryEntry& entry,
           std::int64_t used_at_ms = 0);

  /// Makes room for `rows` records (one allocation instead of rehashing while loading).
  void reserve(std::size_t rows);

  /// The record of exactly this command, or nullptr.
  const HistoryEntry* find_exact(std::uint64_t exact_key) const;
  /// The record of the most recently used command with this fallback key, or nullptr.
  const HistoryEntry* find_fallback(std::uint64_t fallback_key) const;

  std::size_t size() const { return exact_.size(); }
  bool empty() const { return exact_.empty(); }

 private:
  struct Recent {
    HistoryEntry entry;
    std::int64_t used_at_ms;
  };
  std::unordered_map<std::uint64_t, HistoryEntry> exact_;
  std::unordered_map<std::uint64_t, Recent> fallback_;
};

}  // namespace spawnpool::detail
