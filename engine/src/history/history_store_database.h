// The SQLite side of the command history (peaks and durations, and the builds' shapes):
// opening (WAL, schema version, migrating an older schema), reading every row into a
// HistorySnapshot, and writing a batch of records in one transaction, pruned to a row
// bound. One object is one connection: not thread-safe, used by one thread at a
// time (HistoryStore opens it on the pool's thread and then hands it to its writer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/src/history/history_store_snapshot.h"

struct sqlite3;
struct sqlite3_stmt;

namespace spawnpool::detail {

/// One measured run, as it is written.
struct HistoryRecord {
  std::uint64_t exact_key = 0;
  std::uint64_t fallback_key = 0;  ///< 0: the command has none
  std::int64_t peak_bytes = 0;     ///< > 0
  std::int64_t duration_ns = 0;
  std::int64_t used_at_ms = 0;     ///< Unix time in milliseconds; rows are pruned oldest first
  std::uint64_t output_key = 0;    ///< CommandKey::output; 0: none
};

/// One build's shape, as it is written (one row per set of targets: the last build).
struct BuildRecord {
  std::uint64_t targets_key = 0;
  BuildShape shape;
  std::int64_t used_at_ms = 0;
};

/// How opening or writing ended.
enum class HistoryStatus {
  kOk,
  kBusy,      ///< another connection held the lock beyond the busy timeout: retry later
  kReadOnly,  ///< the file or its directory cannot be written (what could be read was)
  kUnusable,  ///< corrupt, not a spawnpool history, a newer schema, or an I/O error
};

struct HistoryDatabaseOptions {
  /// Rows kept; beyond it the least recently used go. A row is about 60 bytes on disk
  /// and 100 in memory; reading 100,000 at pool start takes tens of milliseconds.
  std::size_t max_rows = 100000;
  /// How long a statement waits for another connection's lock (SQLite's busy handler).
  int busy_timeout_ms = 2000;
};

class HistoryDatabase;

/// What opening found.
struct HistoryOpenResult {
  std::unique_ptr<HistoryDatabase> database;  ///< set only when the store can be written
  HistorySnapshot snapshot;  ///< every row read (empty unless status is kOk or kReadOnly)
  HistoryStatus status = HistoryStatus::kOk;
  std::string problem;       ///< one sentence naming the file, when status is not kOk
};

class HistoryDatabase {
 public:
  /// The schema this code reads and writes, kept in `PRAGMA user_version`; the file is
  /// marked as ours by `PRAGMA application_id` (kApplicationId).
  /// 2: durations of commands without a peak, and the builds table (issue 18); a
  /// schema 1 file is migrated when opened for writing.
  /// 3: the builds' kinds (the driver's account of its units by kind); a schema 2 file
  /// is migrated when opened for writing (its builds get none) and read as it is.
  /// 4: the builds' tails (the driver's time after its last command); schema 2 and 3
  /// files are migrated when opened for writing (their builds get 0: unknown) and read
  /// as they are.
  /// 5: the commands' output keys (CommandKey::output); an older file is migrated when
  /// opened for writing (its rows get none until they run again) and read as it is.
  static constexpr int kSchemaVersion = 5;
  static constexpr std::int32_t kApplicationId = 0x53504d48;  // "SPMH"

  /// Opens the store at `path` (creating it and missing parent directories), switches it
  /// to WAL, checks or creates the schema, and reads every row. Never throws: a problem
  /// is a status and a sentence. A file that is not ours, or of a newer schema, is left
  /// untouched. An unwritable file is still read where SQLite can (kReadOnly).
  static HistoryOpenResult open(const std::string& path, const HistoryDatabaseOptions& options);

  ~HistoryDatabase();
  HistoryDatabase(const HistoryDatabase&) = delete;
  HistoryDatabase& operator=(const HistoryDatabase&) = delete;

  /// SQLite's structure check (`PRAGMA quick_check`: b-trees, free list, not index
  /// contents). It reads the whole file, so HistoryStore runs it on its writer thread
  /// rather than at open. kUnusable with a sentence when the file is damaged.
  HistoryStatus check(std::string& problem);

  /// Writes `batch` in one transaction (`BEGIN IMMEDIATE`, so a busy lock shows at the
  /// start rather than as a failed commit), then prunes to max_rows. A command recorded
  /// again keeps the larger of its new peak and 3/4 of its old one: a one-off spike fades
  /// over a few builds, a growing command is followed at once. On kBusy nothing was
  /// written and the same batch may be retried. The duration learned is 3/4 the new run's
  /// and 1/4 the old value (noise is damped, a change is followed within a build or two);
  /// a record's 0 (not measured) leaves the stored peak or duration alone. `builds`
  /// replace the shapes of their targets; 64 sets of targets are kept.
  HistoryStatus write(const std::vector<HistoryRecord>& batch,
                      const std::vector<BuildRecord>& builds, std::string& problem);
  HistoryStatus write(const std::vector<HistoryRecord>& batch, std::string& problem);

  const std::string& path() const { return path_; }

 private:
  HistoryDatabase(sqlite3* db, std::string path, const HistoryDatabaseOptions& options);
  HistoryStatus fail(int code, const char* doing, std::string& problem);
  bool prune(bool builds_written, std::string& problem, HistoryStatus& status);
  /// Steps `*statement` (prepared from `sql` at its first use, kept for the next
  /// batches: a build's writer writes one every couple of seconds) once and resets it;
  /// SQLite's result code (SQLITE_DONE, SQLITE_ROW with `value` its first column).
  int run(sqlite3_stmt** statement, const char* sql, std::int64_t* value = nullptr);

  sqlite3* db_;
  std::string path_;
  HistoryDatabaseOptions options_;
  // Prepared at their first use, finalized with the database (SQLITE_PREPARE_PERSISTENT).
  sqlite3_stmt* upsert_ = nullptr;
  sqlite3_stmt* upsert_build_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;         // BEGIN IMMEDIATE
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* count_ = nullptr;         // the commands' rows
  sqlite3_stmt* drop_builds_ = nullptr;   // the builds beyond kMaxBuilds
};

}  // namespace spawnpool::detail
