// What the history held when the pool started: peak memory and duration per command,
// in hash maps, so that a prediction costs one lookup and no SQLite call, and the shape
// of the last builds (which commands the last build of some targets ran). Built once (by
// HistoryStore), then read-only: safe to read from any thread once built.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace spawnpool::detail {

/// One command's record: what it took the last times it ran.
struct HistoryEntry {
  std::int64_t peak_bytes = 0;   ///< the decayed maximum of its measured peaks; 0: never measured
  std::int64_t duration_ns = 0;  ///< its wall time, decayed (the last run weighs 3/4); 0: unknown
  std::uint64_t output_key = 0;  ///< the file it writes (CommandKey::output); 0: none known
};

/// What the last build of some targets ran (HistoryStore::record_build): the commands'
/// exact keys, in the order they started, one per command run (a key twice if it ran twice).
struct BuildShape {
  std::vector<std::uint64_t> exact_keys;
  /// What the driver built with them, in its own units (SCons: builder calls); 0: unknown.
  std::uint64_t units = 0;
  /// The driver's own account of those units by kind, kept as it gave it (the SCons
  /// plugin: a line `SUFFIX UNITS COMMANDS` per kind of target); empty: none.
  std::string kinds;
  /// The driver's own time after its last command ended, until the build finished (SCons:
  /// the nodes left to evaluate, .sconsign written); 0: unknown, or none.
  std::int64_t tail_ns = 0;
};

class HistorySnapshot {
 public:
  /// Adds a command's record, last used at `used_at_ms`. For a fallback or output key
  /// shared by several commands, the most recently used one stays (on a tie, the later
  /// added). `fallback_key`, `output_key` 0: the command has none.
  void add(std::uint64_t exact_key, std::uint64_t fallback_key, const HistoryEntry& entry,
           std::int64_t used_at_ms = 0, std::uint64_t output_key = 0);

  /// Makes room for `rows` records (one allocation instead of rehashing while loading).
  void reserve(std::size_t rows);

  /// The record of exactly this command, or nullptr.
  const HistoryEntry* find_exact(std::uint64_t exact_key) const;
  /// The record of the most recently used command with this fallback key, or nullptr.
  const HistoryEntry* find_fallback(std::uint64_t fallback_key) const;
  /// The record of the most recently used command that wrote this output file
  /// (CommandKey::output), or nullptr.
  const HistoryEntry* find_output(std::uint64_t output_key) const;

  /// Adds the shape of the last build of the targets named by `targets_key`.
  void add_build(std::uint64_t targets_key, BuildShape shape);
  /// The last build of these targets, or nullptr.
  const BuildShape* find_build(std::uint64_t targets_key) const;

  std::size_t size() const { return exact_.size(); }
  bool empty() const { return exact_.empty(); }

 private:
  struct Recent {
    HistoryEntry entry;
    std::int64_t used_at_ms;
  };
  std::unordered_map<std::uint64_t, HistoryEntry> exact_;
  std::unordered_map<std::uint64_t, Recent> fallback_;
  std::unordered_map<std::uint64_t, Recent> output_;
  std::unordered_map<std::uint64_t, BuildShape> builds_;
};

}  // namespace spawnpool::detail
