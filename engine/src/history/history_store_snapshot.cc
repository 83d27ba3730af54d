#include "engine/src/history/history_store_snapshot.h"

namespace spawnpool::detail {

void HistorySnapshot::add(std::uint64_t exact_key, std::uint64_t fallback_key,
                          const HistoryEntry& entry, std::int64_t used_at_ms) {
  exact_[exact_key] = entry;
  if (fallback_key == 0) return;
  const auto [it, added] = fallback_.try_emplace(fallback_key, Recent{entry, used_at_ms});
  if (!added && used_at_ms >= it->second.used_at_ms) it->second = Recent{entry, used_at_ms};
}

void HistorySnapshot::reserve(std::size_t rows) {
  exact_.reserve(rows);
  fallback_.reserve(rows);
}

const HistoryEntry* HistorySnapshot::find_exact(std::uint64_t exact_key) const {
  const auto it = exact_.find(exact_key);
  return it == exact_.end() ? nullptr : &it->second;
}

const HistoryEntry* HistorySnapshot::find_fallback(std::uint64_t fallback_key) const {
  if (fallback_key == 0) return nullptr;
  const auto it = fallback_.find(fallback_key);
  return it == fallback_.end() ? nullptr : &it->second.entry;
}

void HistorySnapshot::add_build(std::uint64_t targets_key, BuildShape shape) {
  builds_[targets_key] = std::move(shape);
}

const BuildShape* HistorySnapshot::find_build(std::uint64_t targets_key) const {
  const auto it = builds_.find(targets_key);
  return it == builds_.end() ? nullptr : &it->second;
}

}  // namespace spawnpool::detail
