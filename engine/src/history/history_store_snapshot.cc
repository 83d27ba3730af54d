#include "engine/src/history/history_store_snapshot.h"

namespace spawnpool::detail {

namespace {

template <typename Map, typename Recent>
void keep_most_recent(Map& map, std::uint64_t key, const Recent& recent) {
  if (key == 0) return;
  const auto [it, added] = map.try_emplace(key, recent);
  if (!added && recent.used_at_ms >= it->second.used_at_ms) it->second = recent;
}

}  // namespace

void HistorySnapshot::add(std::uint64_t exact_key, std::uint64_t fallback_key,
                          const HistoryEntry& entry, std::int64_t used_at_ms,
                          std::uint64_t output_key) {
  HistoryEntry kept = entry;
  if (output_key != 0) kept.output_key = output_key;
  exact_[exact_key] = kept;
  keep_most_recent(fallback_, fallback_key, Recent{kept, used_at_ms});
  keep_most_recent(output_, kept.output_key, Recent{kept, used_at_ms});
}

void HistorySnapshot::reserve(std::size_t rows) {
  exact_.reserve(rows);
  fallback_.reserve(rows);
  output_.reserve(rows);
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

const HistoryEntry* HistorySnapshot::find_output(std::uint64_t output_key) const {
  if (output_key == 0) return nullptr;
  const auto it = output_.find(output_key);
  return it == output_.end() ? nullptr : &it->second.entry;
}

void HistorySnapshot::add_build(std::uint64_t targets_key, BuildShape shape) {
  builds_[targets_key] = std::move(shape);
}

const BuildShape* HistorySnapshot::find_build(std::uint64_t targets_key) const {
  const auto it = builds_.find(targets_key);
  return it == builds_.end() ? nullptr : &it->second;
}

}  // namespace spawnpool::detail
