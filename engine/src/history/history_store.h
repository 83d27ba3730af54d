// The command history of a build (peaks and durations, the build's shape): the store is
// read once when it opens (into a HistorySnapshot), then each finished command's peak
// and duration are taken in O(1) without I/O and written in batches by a writer thread
// of the store's own. A pool opens one from a path, or is given one shared with others
// (the build's progress, the next pool of a resized build). record(), record_build(),
// flush(), snapshot() and take_snapshot() are thread-safe; the warning callback runs on the opening thread or
// on the writer thread, never under the store's lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/src/history/history_store_database.h"
#include "engine/src/history/history_store_key.h"
#include "engine/src/history/history_store_snapshot.h"

namespace spawnpool::detail {

struct HistoryStoreOptions {
  HistoryDatabaseOptions database;
  /// The writer writes at least this often while records are pending, so that a build
  /// that is killed loses at most this much history.
  std::chrono::milliseconds flush_interval{2000};
  /// ... and sooner once this many are pending (one transaction each time).
  std::size_t flush_batch = 512;
  /// Records kept while the store is locked by another process; older ones are dropped.
  std::size_t max_pending = 1 << 16;
};

/// Receives the store's one warning, a sentence naming the file, what went wrong and
/// what the pool does instead. Must be callable from any thread.
using HistoryWarning = std::function<void(const std::string& message)>;

class HistoryStore {
 public:
  /// Opens the store at `path` and reads it whole (see HistoryDatabase::open). Never
  /// throws for a store problem: a corrupt, foreign, newer-schema, locked or unwritable
  /// store calls `warn` once and the pool goes on without history (a read-only one still
  /// gives what it holds). `warn` is called at most once over the store's life.
  HistoryStore(const std::string& path, HistoryStoreOptions options, HistoryWarning warn);
  /// Writes what is pending (waiting at most the busy timeout for a lock), then stops the
  /// writer. A store still locked then loses those records, with the one warning.
  ~HistoryStore();
  HistoryStore(const HistoryStore&) = delete;
  HistoryStore& operator=(const HistoryStore&) = delete;

  /// What the store held at open, for a reader that keeps its own copy (the admission
  /// policy); a second call returns an empty snapshot.
  HistorySnapshot take_snapshot();
  /// What the store held at open, shared and read-only (never null).
  std::shared_ptr<const HistorySnapshot> snapshot() const { return shared_snapshot_; }

  /// Takes one finished command's measurement; written later by the writer thread. A
  /// peak of 0 or less is not measured (the duration alone is learned); a record with
  /// neither is ignored, and so is everything once the store has given up. Costs a lock
  /// and a vector append.
  void record(const CommandKey& key, std::int64_t peak_bytes, std::int64_t duration_ns);
  /// Takes the shape of the build of the targets `targets_key` names (replacing the one
  /// before); written with the next batch.
  void record_build(std::uint64_t targets_key, BuildShape shape);

  /// Has everything recorded before the call written now, waiting for the writer (at
  /// most two rounds, so a locked store does not block the caller for long). Returns
  /// whether it was all written.
  bool flush();

  /// Whether records are still being written (false once the store gave up, or when it
  /// never opened for writing).
  bool recording() const;
  /// What opening found (kOk, or why there is no history or no recording).
  HistoryStatus open_status() const { return open_status_; }

 private:
  void writer_loop();
  void give_up(std::unique_lock<std::mutex>& lock, const std::string& warning);
  void warn_once(const std::string& message);

  HistoryWarning warn_;
  HistoryStoreOptions options_;
  HistoryStatus open_status_ = HistoryStatus::kOk;
  std::unique_ptr<HistoryDatabase> database_;  // used by the writer thread only

  mutable std::mutex mutex_;
  std::condition_variable wake_writer_;
  std::condition_variable round_done_;
  std::shared_ptr<const HistorySnapshot> shared_snapshot_;  // set at open, then read-only
  bool snapshot_taken_ = false;          // guarded by mutex_
  std::vector<HistoryRecord> pending_;   // guarded by mutex_
  std::vector<BuildRecord> pending_builds_;  // guarded by mutex_
  std::uint64_t recorded_ = 0;           // records accepted; guarded by mutex_
  std::uint64_t settled_ = 0;            // records written or dropped; guarded by mutex_
  std::uint64_t rounds_ = 0;             // writer rounds finished; guarded by mutex_
  std::uint64_t flush_target_ = 0;       // a flush() waits for settled_ to reach it; mutex_
  bool stop_ = false;                    // guarded by mutex_
  bool writing_ = false;                 // the writer still writes; guarded by mutex_
  std::once_flag warned_;
  std::thread writer_;
};

}  // namespace spawnpool::detail
