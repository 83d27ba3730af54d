#include "engine/src/history/history_store_database.h"

#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace spawnpool::detail {
namespace {

constexpr const char* kCreateSchema =
    "CREATE TABLE commands ("
    "  exact_key INTEGER PRIMARY KEY,"  // hash of argv and cwd (a rowid: no extra index)
    "  fallback_key INTEGER,"           // hash of program and output path; NULL: none
    "  peak_bytes INTEGER NOT NULL,"
    "  duration_ns INTEGER NOT NULL,"
    "  runs INTEGER NOT NULL,"
    "  last_used INTEGER NOT NULL,"     // Unix milliseconds of the last run
    "  output_key INTEGER);"            // schema 5: hash of the output path; NULL: none
    "CREATE INDEX commands_by_last_used ON commands(last_used);";

// Schema 2 (durations for the status line's ETA, issue 18): a build's shape, and peaks
// may be 0 (a command that ran without memory admission: its duration only).
constexpr const char* kCreateBuilds =
    "CREATE TABLE builds ("
    "  targets_key INTEGER PRIMARY KEY,"  // hash of the build's targets (the embedder's)
    "  exact_keys BLOB NOT NULL,"         // the commands' exact keys, 8 bytes each
    "  units INTEGER NOT NULL,"           // what the driver built with them (0: unknown)
    "  last_used INTEGER NOT NULL,"
    "  kinds TEXT NOT NULL DEFAULT '',"   // schema 3: the driver's units by kind
    "  tail_ns INTEGER NOT NULL DEFAULT 0);";  // schema 4: BuildShape::tail_ns

// Schema 2 to 3: the builds keep their rows, with no kinds; 3 to 4: with no tail.
constexpr const char* kAddKinds = "ALTER TABLE builds ADD COLUMN kinds TEXT NOT NULL DEFAULT '';";
constexpr const char* kAddTail = "ALTER TABLE builds ADD COLUMN tail_ns INTEGER NOT NULL DEFAULT 0;";
// Schema 4 to 5: the commands keep their rows, with no output key (until they run again).
constexpr const char* kAddOutputKey = "ALTER TABLE commands ADD COLUMN output_key INTEGER;";

// Builds kept; beyond it the least recently used go (one per set of targets).
constexpr int kMaxBuilds = 64;
constexpr const char* kDropBuilds =
    "DELETE FROM builds WHERE targets_key NOT IN"
    " (SELECT targets_key FROM builds ORDER BY last_used DESC LIMIT 64)";
static_assert(kMaxBuilds == 64, "kDropBuilds keeps kMaxBuilds builds");

constexpr const char* kUpsertBuild =
    "INSERT INTO builds (targets_key, exact_keys, units, last_used, kinds, tail_ns)"
    " VALUES (?1, ?2, ?3, ?4, ?5, ?6)"
    " ON CONFLICT (targets_key) DO UPDATE SET"
    "  exact_keys = excluded.exact_keys, units = excluded.units, last_used = excluded.last_used,"
    "  kinds = excluded.kinds, tail_ns = excluded.tail_ns";

// The larger of the new peak and 3/4 of the old, the duration 3/4 new and 1/4 old: see
// HistoryDatabase::write. A run that measured nothing (0) leaves the old value alone.
constexpr const char* kUpsert =
    "INSERT INTO commands (exact_key, fallback_key, peak_bytes, duration_ns, runs, last_used,"
    "  output_key)"
    " VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)"
    " ON CONFLICT (exact_key) DO UPDATE SET"
    "  fallback_key = excluded.fallback_key, output_key = excluded.output_key,"
    "  peak_bytes = CASE WHEN excluded.peak_bytes > 0"
    "    THEN max(excluded.peak_bytes, peak_bytes * 3 / 4) ELSE peak_bytes END,"
    "  duration_ns = CASE WHEN excluded.duration_ns <= 0 THEN duration_ns"
    "    WHEN duration_ns <= 0 THEN excluded.duration_ns"
    "    ELSE (3 * excluded.duration_ns + duration_ns) / 4 END,"
    "  runs = runs + 1,"
    "  last_used = max(last_used, excluded.last_used)";

// In rowid order: a sequential scan (ORDER BY last_used would cost a lookup per row;
// HistorySnapshot sorts out which row of a fallback or output key is the most recent).
// A file older than schema 5 has no output keys.
constexpr const char* kLoad =
    "SELECT exact_key, fallback_key, peak_bytes, duration_ns, last_used, output_key FROM commands";
constexpr const char* kLoadBefore5 =
    "SELECT exact_key, fallback_key, peak_bytes, duration_ns, last_used, NULL FROM commands";

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { code_ = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr); }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  int code() const { return code_; }
  sqlite3_stmt* get() const { return stmt_; }
  /// Steps once; the code (SQLITE_ROW, SQLITE_DONE or an error) is kept in code().
  bool step() {
    if (code_ == SQLITE_OK || code_ == SQLITE_ROW) code_ = sqlite3_step(stmt_);
    return code_ == SQLITE_ROW;
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
  int code_;
};

HistoryStatus status_of(int code) {
  switch (code & 0xff) {
    case SQLITE_OK: case SQLITE_DONE: case SQLITE_ROW: return HistoryStatus::kOk;
    case SQLITE_BUSY: case SQLITE_LOCKED: return HistoryStatus::kBusy;
    case SQLITE_READONLY: case SQLITE_CANTOPEN: case SQLITE_PERM: case SQLITE_AUTH:
      return HistoryStatus::kReadOnly;
    default: return HistoryStatus::kUnusable;
  }
}

// "memory history PATH: DOING failed: WHY", with what to do about a damaged file.
std::string describe(const std::string& path, const char* doing, sqlite3* db, int code) {
  std::string text = "memory history " + path + ": " + doing + " failed: " +
                     (db ? sqlite3_errmsg(db) : sqlite3_errstr(code));
  const int primary = code & 0xff;
  if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_ERROR)
    text += " (remove the file to start a new history)";
  return text;
}

// Runs statements that return nothing of interest (or a row we ignore).
int exec(sqlite3* db, const char* sql) { return sqlite3_exec(db, sql, nullptr, nullptr, nullptr); }

// Runs a statement that returns one integer (a pragma, a count).
int query_int(sqlite3* db, const char* sql, std::int64_t& value) {
  Statement statement(db, sql);
  if (statement.step()) value = sqlite3_column_int64(statement.get(), 0);
  return statement.code() == SQLITE_ROW ? SQLITE_OK : statement.code();
}

// Whether the file has no schema yet (kOk, fresh), holds ours (kOk), or is not usable.
HistoryStatus check_schema(sqlite3* db, const std::string& path, bool& fresh,
                           std::string& problem) {
  std::int64_t application_id = 0, version = 0, objects = 0;
  int code = query_int(db, "PRAGMA application_id", application_id);
  if (code == SQLITE_OK) code = query_int(db, "PRAGMA user_version", version);
  if (code == SQLITE_OK) code = query_int(db, "SELECT count(*) FROM sqlite_schema", objects);
  if (code != SQLITE_OK) {
    problem = describe(path, "reading the schema", db, code);
    return status_of(code);
  }
  fresh = application_id == 0 && version == 0 && objects == 0;
  if (fresh) return HistoryStatus::kOk;
  if (application_id != HistoryDatabase::kApplicationId) {
    problem = "memory history " + path +
              " is not a spawnpool history (another program's SQLite database?)";
  } else if (version > HistoryDatabase::kSchemaVersion) {
    problem = "memory history " + path + " was written by a newer spawnpool (schema " +
              std::to_string(version) + ", this one reads " +
              std::to_string(HistoryDatabase::kSchemaVersion) + "; remove it to start a new one)";
  } else if (version < 1) {
    problem = "memory history " + path +
              " has no schema version (damaged? remove it to start a new history)";
  } else {
    return HistoryStatus::kOk;  // older schemas are migrated by migrate_schema()
  }
  return HistoryStatus::kUnusable;
}

// The file's schema version (0: none, or unreadable).
std::int64_t schema_version(sqlite3* db) {
  std::int64_t version = 0;
  return query_int(db, "PRAGMA user_version", version) == SQLITE_OK ? version : 0;
}

// Whether the file holds a schema older than ours (it is read as it is; writing needs
// the migration).
bool older_schema(sqlite3* db) {
  const std::int64_t version = schema_version(db);
  return version > 0 && version < HistoryDatabase::kSchemaVersion;
}

// Creates the schema unless another process did it first (checked again under the lock).
HistoryStatus create_schema(sqlite3* db, const std::string& path, std::string& problem) {
  int code = exec(db, "BEGIN IMMEDIATE");
  if (code != SQLITE_OK) {
    problem = describe(path, "creating the schema", db, code);
    return status_of(code);
  }
  bool fresh = false;
  HistoryStatus status = check_schema(db, path, fresh, problem);
  if (status == HistoryStatus::kOk && fresh) {
    const std::string create = std::string(kCreateSchema) + kCreateBuilds +
                               "PRAGMA application_id = " +
                               std::to_string(HistoryDatabase::kApplicationId) +
                               "; PRAGMA user_version = " +
                               std::to_string(HistoryDatabase::kSchemaVersion) + ";";
    code = exec(db, create.c_str());
    if (code != SQLITE_OK) {
      problem = describe(path, "creating the schema", db, code);
      status = status_of(code);
    }
  }
  code = exec(db, status == HistoryStatus::kOk ? "COMMIT" : "ROLLBACK");
  if (status == HistoryStatus::kOk && code != SQLITE_OK) {
    problem = describe(path, "creating the schema", db, code);
    status = status_of(code);
    exec(db, "ROLLBACK");
  }
  return status;
}

// Schema 1 to 2: the builds table as it is now (peaks of 0 need no change: the column was
// NOT NULL and stays so); 2 to 3: the builds' kinds column; 3 to 4: their tail_ns column;
// 4 to 5: the commands' output_key column. Under the write lock, checked again there:
// another process may have migrated first.
std::string migration_from(std::int64_t version) {
  std::string steps;
  if (version < 2) {
    steps = kCreateBuilds;
  } else {
    if (version < 3) steps += kAddKinds;
    if (version < 4) steps += kAddTail;
  }
  if (version < 5) steps += kAddOutputKey;
  return steps;
}

HistoryStatus migrate_schema(sqlite3* db, const std::string& path, std::string& problem) {
  int code = exec(db, "BEGIN IMMEDIATE");
  if (code == SQLITE_OK && older_schema(db)) {
    const std::string migrate = migration_from(schema_version(db)) + "PRAGMA user_version = " +
                                std::to_string(HistoryDatabase::kSchemaVersion) + ";";
    code = exec(db, migrate.c_str());
  }
  if (code == SQLITE_OK) code = exec(db, "COMMIT");
  if (code == SQLITE_OK) return HistoryStatus::kOk;
  problem = describe(path, "updating the schema", db, code);
  if (!sqlite3_get_autocommit(db)) exec(db, "ROLLBACK");
  return status_of(code);
}

// The builds' shapes (a schema 1 file has none; a schema 2 file's have no kinds, a
// schema 3 file's no tail).
HistoryStatus load_builds(sqlite3* db, const std::string& path, HistorySnapshot& snapshot,
                          std::string& problem) {
  const std::int64_t version = schema_version(db);
  if (version < 2) return HistoryStatus::kOk;
  Statement rows(db, version < 3   ? "SELECT targets_key, exact_keys, units, '', 0 FROM builds"
                     : version < 4 ? "SELECT targets_key, exact_keys, units, kinds, 0 FROM builds"
                                   : "SELECT targets_key, exact_keys, units, kinds, tail_ns FROM builds");
  while (rows.step()) {
    const auto* data = static_cast<const unsigned char*>(sqlite3_column_blob(rows.get(), 1));
    const int bytes = sqlite3_column_bytes(rows.get(), 1);
    BuildShape shape;
    shape.exact_keys.resize(static_cast<std::size_t>(bytes) / 8);
    if (data && !shape.exact_keys.empty())
      std::memcpy(shape.exact_keys.data(), data, shape.exact_keys.size() * 8);
    shape.units = static_cast<std::uint64_t>(std::max<sqlite3_int64>(sqlite3_column_int64(rows.get(), 2), 0));
    if (const auto* kinds = reinterpret_cast<const char*>(sqlite3_column_text(rows.get(), 3)))
      shape.kinds.assign(kinds, static_cast<std::size_t>(sqlite3_column_bytes(rows.get(), 3)));
    shape.tail_ns = std::max<sqlite3_int64>(sqlite3_column_int64(rows.get(), 4), 0);
    snapshot.add_build(static_cast<std::uint64_t>(sqlite3_column_int64(rows.get(), 0)),
                       std::move(shape));
  }
  if (rows.code() == SQLITE_DONE) return HistoryStatus::kOk;
  problem = describe(path, "reading the builds", db, rows.code());
  return status_of(rows.code()) == HistoryStatus::kBusy ? HistoryStatus::kBusy
                                                         : HistoryStatus::kUnusable;
}

// Every row. A damaged table shows here; the rest of the file (index, free list) is
// checked by HistoryDatabase::check() off the pool's start path.
HistoryStatus load(sqlite3* db, const std::string& path, HistorySnapshot& snapshot,
                   std::string& problem) {
  std::int64_t count = 0;
  if (query_int(db, "SELECT count(*) FROM commands", count) == SQLITE_OK && count > 0)
    snapshot.reserve(static_cast<std::size_t>(count));
  Statement rows(db, schema_version(db) < 5 ? kLoadBefore5 : kLoad);
  while (rows.step()) {
    HistoryEntry entry;
    entry.peak_bytes = sqlite3_column_int64(rows.get(), 2);
    entry.duration_ns = sqlite3_column_int64(rows.get(), 3);
    if (entry.peak_bytes <= 0 && entry.duration_ns <= 0) continue;
    entry.peak_bytes = std::max<std::int64_t>(entry.peak_bytes, 0);
    snapshot.add(static_cast<std::uint64_t>(sqlite3_column_int64(rows.get(), 0)),
                 static_cast<std::uint64_t>(sqlite3_column_int64(rows.get(), 1)), entry,
                 sqlite3_column_int64(rows.get(), 4),
                 static_cast<std::uint64_t>(sqlite3_column_int64(rows.get(), 5)));
  }
  if (rows.code() != SQLITE_DONE) {
    snapshot = HistorySnapshot();
    problem = describe(path, "reading", db, rows.code());
    return status_of(rows.code()) == HistoryStatus::kBusy ? HistoryStatus::kBusy
                                                           : HistoryStatus::kUnusable;
  }
  return load_builds(db, path, snapshot, problem);
}

// WAL: readers never wait for the writer, and several processes of one build can each
// append. NORMAL sync is safe in WAL mode (a power cut may lose the last transactions,
// never the file) and saves an fsync per batch. A directory we cannot write refuses WAL
// (it needs the -wal and -shm files): that is a read-only store.
bool switch_to_wal(sqlite3* db, const std::string& path, HistoryStatus& status,
                   std::string& problem) {
  std::string mode;
  int code;
  {
    Statement wal(db, "PRAGMA journal_mode = WAL");
    if (wal.step()) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(wal.get(), 0));
      mode = text ? text : "";
    }
    code = wal.code();
  }
  if (mode == "wal") {
    exec(db, "PRAGMA synchronous = NORMAL");
    return true;
  }
  if (code == SQLITE_ROW) {
    problem = "memory history " + path + ": SQLite refused WAL mode (directory not writable?)";
    status = HistoryStatus::kReadOnly;
  } else {
    problem = describe(path, "switching to WAL", db, code);
    status = status_of(code);
  }
  return false;
}

sqlite3* connect(const std::string& name, int flags, int busy_timeout_ms, int& code) {
  sqlite3* db = nullptr;
  code = sqlite3_open_v2(name.c_str(), &db, flags | SQLITE_OPEN_NOMUTEX, nullptr);
  if (code != SQLITE_OK) {
    sqlite3_close_v2(db);
    return nullptr;
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return db;
}

// `file:` URI for `path`, for SQLite's immutable read (its own escaping: %HH).
std::string immutable_uri(const std::string& path) {
  std::string uri = "file:";
  for (char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      static const char kHex[] = "0123456789ABCDEF";
      uri += '%';
      uri += kHex[(static_cast<unsigned char>(c) >> 4) & 0xf];
      uri += kHex[static_cast<unsigned char>(c) & 0xf];
    } else {
      uri += c;
    }
  }
  return uri + "?immutable=1";
}

// Reads what an unwritable store holds, first as immutable: a plain read-only open of a
// WAL file creates -wal and -shm files beside it (or fails, in a directory we cannot
// write), and we may not write anything there. Immutable skips what a live writer has
// not checkpointed yet: the history is then a little older, which is harmless.
HistoryStatus read_only_load(const std::string& path, int busy_timeout_ms,
                             HistorySnapshot& snapshot, std::string& problem) {
  if (::access(path.c_str(), R_OK) != 0) return HistoryStatus::kReadOnly;
  for (int attempt = 0; attempt < 2; ++attempt) {
    int code = SQLITE_OK;
    const bool immutable = attempt == 0;
    sqlite3* db = connect(immutable ? immutable_uri(path) : path,
                          SQLITE_OPEN_READONLY | (immutable ? SQLITE_OPEN_URI : 0),
                          busy_timeout_ms, code);
    if (!db) continue;
    bool fresh = false;
    HistoryStatus status = check_schema(db, path, fresh, problem);
    if (status == HistoryStatus::kOk && !fresh) status = load(db, path, snapshot, problem);
    sqlite3_close_v2(db);
    if (status != HistoryStatus::kReadOnly) return status == HistoryStatus::kOk ? HistoryStatus::kReadOnly : status;
  }
  return HistoryStatus::kReadOnly;
}

}  // namespace

HistoryOpenResult HistoryDatabase::open(const std::string& path,
                                        const HistoryDatabaseOptions& options) {
  HistoryOpenResult result;
  std::error_code ignored;  // a directory we cannot make shows as the open's failure
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ignored);

  int code = SQLITE_OK;
  sqlite3* db = connect(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE,
                        options.busy_timeout_ms, code);
  std::string problem;
  HistoryStatus status = HistoryStatus::kReadOnly;
  if (!db) {
    problem = describe(path, ::access(path.c_str(), F_OK) == 0 ? "opening" : "creating it",
                       nullptr, code);
    status = status_of(code);
  } else if (sqlite3_db_readonly(db, "main") == 1) {
    problem = "memory history " + path + " is read-only";
  } else {
    bool fresh = false;
    if (!switch_to_wal(db, path, status, problem)) {
      // status and problem say why
    } else if ((status = check_schema(db, path, fresh, problem)) == HistoryStatus::kOk &&
               (!fresh || (status = create_schema(db, path, problem)) == HistoryStatus::kOk) &&
               (!older_schema(db) || (status = migrate_schema(db, path, problem)) == HistoryStatus::kOk)) {
      status = load(db, path, result.snapshot, problem);
    }
  }
  if (status == HistoryStatus::kOk) {
    result.database.reset(new HistoryDatabase(db, path, options));
    return result;
  }
  sqlite3_close_v2(db);
  if (status == HistoryStatus::kReadOnly) {
    std::string read_problem;
    status = read_only_load(path, options.busy_timeout_ms, result.snapshot, read_problem);
    if (status == HistoryStatus::kUnusable) problem = read_problem;
  }
  result.status = status;
  result.problem = problem;
  return result;
}

HistoryDatabase::HistoryDatabase(sqlite3* db, std::string path,
                                 const HistoryDatabaseOptions& options)
    : db_(db), path_(std::move(path)), options_(options) {}

HistoryDatabase::~HistoryDatabase() {
  for (sqlite3_stmt* statement : {upsert_, upsert_build_, begin_, commit_, count_, drop_builds_})
    sqlite3_finalize(statement);
  sqlite3_close_v2(db_);  // the last connection checkpoints the WAL and removes it
}

HistoryStatus HistoryDatabase::check(std::string& problem) {
  Statement check(db_, "PRAGMA quick_check(1)");
  if (!check.step()) return fail(check.code(), "checking the file", problem);
  const auto* answer = reinterpret_cast<const char*>(sqlite3_column_text(check.get(), 0));
  if (answer && std::string(answer) == "ok") return HistoryStatus::kOk;
  std::string what = answer ? answer : "?";
  std::replace(what.begin(), what.end(), '\n', ' ');  // one line, as warnings are
  problem = "memory history " + path_ + " is corrupt (" + what +
            "; remove it to start a new history)";
  return HistoryStatus::kUnusable;
}

HistoryStatus HistoryDatabase::fail(int code, const char* doing, std::string& problem) {
  problem = describe(path_, doing, db_, code);
  if (!sqlite3_get_autocommit(db_)) exec(db_, "ROLLBACK");
  return status_of(code);
}

HistoryStatus HistoryDatabase::write(const std::vector<HistoryRecord>& batch,
                                     std::string& problem) {
  return write(batch, {}, problem);
}

HistoryStatus HistoryDatabase::write(const std::vector<HistoryRecord>& batch,
                                     const std::vector<BuildRecord>& builds,
                                     std::string& problem) {
  if (batch.empty() && builds.empty()) return HistoryStatus::kOk;
  int code = upsert_ ? SQLITE_OK : sqlite3_prepare_v3(db_, kUpsert, -1, SQLITE_PREPARE_PERSISTENT, &upsert_, nullptr);
  if (code != SQLITE_OK) return fail(code, "preparing a write", problem);
  if ((code = run(&begin_, "BEGIN IMMEDIATE")) != SQLITE_DONE) return fail(code, "writing", problem);
  for (const HistoryRecord& record : batch) {
    sqlite3_bind_int64(upsert_, 1, static_cast<sqlite3_int64>(record.exact_key));
    if (record.fallback_key)
      sqlite3_bind_int64(upsert_, 2, static_cast<sqlite3_int64>(record.fallback_key));
    else
      sqlite3_bind_null(upsert_, 2);
    sqlite3_bind_int64(upsert_, 3, record.peak_bytes);
    sqlite3_bind_int64(upsert_, 4, record.duration_ns);
    sqlite3_bind_int64(upsert_, 5, record.used_at_ms);
    if (record.output_key)
      sqlite3_bind_int64(upsert_, 6, static_cast<sqlite3_int64>(record.output_key));
    else
      sqlite3_bind_null(upsert_, 6);
    code = sqlite3_step(upsert_);
    sqlite3_reset(upsert_);
    if (code != SQLITE_DONE) return fail(code, "writing", problem);
  }
  if (!builds.empty() && !upsert_build_ &&
      (code = sqlite3_prepare_v3(db_, kUpsertBuild, -1, SQLITE_PREPARE_PERSISTENT,
                                 &upsert_build_, nullptr)) != SQLITE_OK)
    return fail(code, "preparing a write", problem);
  for (const BuildRecord& build : builds) {
    sqlite3_bind_int64(upsert_build_, 1, static_cast<sqlite3_int64>(build.targets_key));
    // An empty build is an empty blob, not NULL (SQLite binds a null pointer as NULL).
    static const std::uint64_t kNothing = 0;
    const auto& keys = build.shape.exact_keys;
    sqlite3_bind_blob64(upsert_build_, 2, keys.empty() ? &kNothing : keys.data(),
                        keys.size() * 8, SQLITE_STATIC);
    sqlite3_bind_int64(upsert_build_, 3, static_cast<sqlite3_int64>(build.shape.units));
    sqlite3_bind_int64(upsert_build_, 4, build.used_at_ms);
    sqlite3_bind_text64(upsert_build_, 5, build.shape.kinds.data(), build.shape.kinds.size(),
                        SQLITE_STATIC, SQLITE_UTF8);
    sqlite3_bind_int64(upsert_build_, 6, build.shape.tail_ns);
    code = sqlite3_step(upsert_build_);
    sqlite3_reset(upsert_build_);
    if (code != SQLITE_DONE) return fail(code, "writing a build", problem);
  }
  HistoryStatus status = HistoryStatus::kOk;
  if (!prune(!builds.empty(), problem, status)) return status;
  if ((code = run(&commit_, "COMMIT")) != SQLITE_DONE) return fail(code, "committing", problem);
  return HistoryStatus::kOk;
}

int HistoryDatabase::run(sqlite3_stmt** statement, const char* sql, std::int64_t* value) {
  if (!*statement) {
    const int code = sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, statement, nullptr);
    if (code != SQLITE_OK) return code;
  }
  const int code = sqlite3_step(*statement);
  if (code == SQLITE_ROW && value) *value = sqlite3_column_int64(*statement, 0);
  // The error, if any, is step()'s (extended codes are on): reset() only repeats it.
  sqlite3_reset(*statement);
  return code;
}

// Inside write()'s transaction: drops the least recently used rows beyond max_rows, and
// the builds beyond kMaxBuilds when it wrote one (no other write adds any).
bool HistoryDatabase::prune(bool builds_written, std::string& problem, HistoryStatus& status) {
  std::int64_t rows = 0;
  int code = run(&count_, "SELECT count(*) FROM commands", &rows);
  code = code == SQLITE_ROW ? SQLITE_OK : code;
  if (code == SQLITE_OK && rows > static_cast<std::int64_t>(options_.max_rows)) {
    Statement drop(db_, "DELETE FROM commands WHERE exact_key IN"
                        " (SELECT exact_key FROM commands ORDER BY last_used LIMIT ?1)");
    if (drop.code() == SQLITE_OK) {
      sqlite3_bind_int64(drop.get(), 1, rows - static_cast<std::int64_t>(options_.max_rows));
      drop.step();
    }
    code = drop.code() == SQLITE_DONE ? SQLITE_OK : drop.code();
  }
  if (code == SQLITE_OK && builds_written) {
    code = run(&drop_builds_, kDropBuilds);
    code = code == SQLITE_DONE ? SQLITE_OK : code;
  }
  if (code == SQLITE_OK) return true;
  status = fail(code, "pruning", problem);
  return false;
}

}  // namespace spawnpool::detail
