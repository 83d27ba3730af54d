// The memory history store when the file is bad: garbage, truncated, another program's
// database, a newer schema, read-only (file and directory), locked by another
// connection at open or while writing. Each gives one warning at most, the pool goes on
// without history (a read-only store still gives what it holds), and the file is left
// as it was.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "engine/src/history/history_store.h"
#include "engine/src/history/history_store_database.h"
#include "tests/unit/support/memory_test_support.h"

namespace spawnpool::detail {
namespace {

constexpr std::int64_t kMiB = 1 << 20;

HistoryStoreOptions quick_options() { return test::store_options(10, 100); }

// A store of `rows` rows, closed cleanly (no -wal or -shm left).
void make_store(const std::string& path, std::uint64_t rows) {
  HistoryOpenResult opened = HistoryDatabase::open(path, {});
  REQUIRE(opened.database);
  std::vector<HistoryRecord> batch;
  for (std::uint64_t n = 1; n <= rows; ++n)
    batch.push_back({n, n + 1000000, static_cast<std::int64_t>(n) * kMiB, 5, 1});
  std::string problem;
  REQUIRE(opened.database->write(batch, problem) == HistoryStatus::kOk);
}

// Opens a store at `path` that must come up without history and without recording,
// with exactly one warning holding `expected`.
void expect_no_history(const std::string& path, const std::string& expected) {
  test::Warnings warnings;
  {
    HistoryStore store(path, quick_options(), warnings.sink());
    CHECK(store.take_snapshot().empty());
    CHECK_FALSE(store.recording());
    store.record(test::test_key(1), kMiB, 1);  // taken and dropped, not an error
    CHECK_FALSE(store.flush());
  }
  const std::vector<std::string> messages = warnings.messages();
  REQUIRE(messages.size() == 1);
  CAPTURE(messages[0]);
  CHECK(messages[0].find(path) != std::string::npos);
  CHECK(messages[0].find(expected) != std::string::npos);
  CHECK(messages[0].find("without memory history") != std::string::npos);
}

TEST_CASE_METHOD(test::StoreFixture, "a file of garbage: one warning, no history, the file untouched", "[memory][history][corrupt]") {
  std::string garbage(8192, '\0');
  for (std::size_t i = 0; i < garbage.size(); ++i) garbage[i] = static_cast<char>((i * 7919) ^ (i >> 3));
  std::ofstream(path, std::ios::binary) << garbage;
  expect_no_history(path, "not a database");
  CHECK(test::read_file(path) == garbage);
}

TEST_CASE_METHOD(test::StoreFixture, "a truncated store: one warning, no history, the file untouched", "[memory][history][corrupt]") {
  make_store(path, 5000);  // many pages, so that half the file is half the tree
  const auto size = std::filesystem::file_size(path);
  REQUIRE(size > 64 * 1024);
  std::filesystem::resize_file(path, size / 2);
  const std::string truncated = test::read_file(path);
  expect_no_history(path, "malformed");
  CHECK(test::read_file(path) == truncated);
}

TEST_CASE_METHOD(test::StoreFixture, "a damaged index is found by the writer's check: history read, nothing written", "[memory][history][corrupt]") {
  make_store(path, 5000);
  // Overwrite the index's root page: the table (all the load reads) stays whole.
  const long page_size = std::stol(test::sql(path, "PRAGMA page_size"));
  const long root = std::stol(
      test::sql(path, "SELECT rootpage FROM sqlite_schema WHERE name = 'commands_by_last_used'"));
  {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp((root - 1) * page_size);
    const std::string junk(static_cast<std::size_t>(page_size), '\x5a');
    file.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const std::string damaged = test::read_file(path);
  {
    HistoryStore store(path, quick_options(), warnings.sink());
    CHECK(store.take_snapshot().size() == 5000);
    CHECK(test::wait_until([&] { return !store.recording(); }));
    store.record(test::test_key(1), kMiB, 1);
    CHECK_FALSE(store.flush());
  }
  const std::vector<std::string> messages = warnings.messages();
  REQUIRE(messages.size() == 1);
  CAPTURE(messages[0]);
  CHECK(messages[0].find("is corrupt") != std::string::npos);
  CHECK(test::read_file(path) == damaged);
}

TEST_CASE_METHOD(test::StoreFixture, "a store of the wrong schema is left alone", "[memory][history][schema]") {
  SECTION("written by a newer spawnpool") {
    make_store(path, 3);
    REQUIRE(test::sql(path, "PRAGMA user_version = 7") == "");
    expect_no_history(path, "newer spawnpool (schema 7");
    CHECK(test::sql(path, "PRAGMA user_version") == "7");
    CHECK(test::sql(path, "SELECT count(*) FROM commands") == "3");
  }
  SECTION("another program's database") {
    REQUIRE(test::sql(path, "CREATE TABLE notes (text TEXT); INSERT INTO notes VALUES ('mine')") == "");
    expect_no_history(path, "not a spawnpool history");
    CHECK(test::sql(path, "SELECT text FROM notes") == "mine");
  }
  SECTION("ours, but without a schema version") {
    make_store(path, 3);
    REQUIRE(test::sql(path, "PRAGMA user_version = 0") == "");
    expect_no_history(path, "no schema version");
  }
  SECTION("ours, with the table gone") {
    make_store(path, 3);
    REQUIRE(test::sql(path, "DROP TABLE commands") == "");
    expect_no_history(path, "no such table");
  }
}

TEST_CASE_METHOD(test::StoreFixture, "a read-only store file is read, and nothing is written to it", "[memory][history][readonly]") {
  make_store(path, 3);
  REQUIRE(chmod(path.c_str(), 0444) == 0);
  const std::string before = test::read_file(path);
  {
    test::FileModesBind modes_bind;
    REQUIRE(modes_bind.binding());
    HistoryStore store(path, quick_options(), warnings.sink());
    const HistorySnapshot snapshot = store.take_snapshot();
    CHECK(store.open_status() == HistoryStatus::kReadOnly);
    CHECK(snapshot.size() == 3);
    REQUIRE(snapshot.find_exact(2));
    CHECK(snapshot.find_exact(2)->peak_bytes == 2 * kMiB);
    CHECK_FALSE(store.recording());
    store.record(test::test_key(50), kMiB, 1);
  }
  const std::vector<std::string> messages = warnings.messages();
  REQUIRE(messages.size() == 1);
  CHECK(messages[0].find("read-only") != std::string::npos);
  CHECK(messages[0].find("recording nothing new") != std::string::npos);
  CHECK(test::read_file(path) == before);
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));  // nothing made beside it either
  CHECK_FALSE(std::filesystem::exists(path + "-shm"));
}

TEST_CASE("a store in a read-only directory", "[memory][history][readonly]") {
  test::TempDir dir;
  const std::string store_dir = dir / "ro";
  std::filesystem::create_directory(store_dir);
  const std::string path = store_dir + "/history.sqlite";
  SECTION("that does not exist yet: no history, nothing created") {
    REQUIRE(chmod(store_dir.c_str(), 0555) == 0);
    {
      test::FileModesBind modes_bind;
      REQUIRE(modes_bind.binding());
      expect_no_history(path, "creating it failed");
    }
    CHECK(std::filesystem::is_empty(store_dir));
  }
  SECTION("that exists: what it holds is used, nothing is written") {
    make_store(path, 4);
    REQUIRE(chmod(store_dir.c_str(), 0555) == 0);
    const std::string before = test::read_file(path);
    test::Warnings warnings;
    {
      test::FileModesBind modes_bind;
      REQUIRE(modes_bind.binding());
      HistoryStore store(path, quick_options(), warnings.sink());
      CHECK(store.take_snapshot().size() == 4);
      CHECK_FALSE(store.recording());
    }
    CHECK(warnings.messages().size() == 1);
    CHECK(test::read_file(path) == before);
    CHECK(std::filesystem::directory_iterator(store_dir)->path() == path);  // no -wal/-shm
  }
  chmod(store_dir.c_str(), 0755);  // so TempDir can remove it
}

// Another connection that holds the store's lock until released.
class LockHolder {
 public:
  LockHolder(const std::string& path, const char* lock_sql) {
    REQUIRE(sqlite3_open(path.c_str(), &db_) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db_, lock_sql, nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  ~LockHolder() { release(); }
  void release() {
    if (!db_) return;
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    db_ = nullptr;
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST_CASE_METHOD(test::StoreFixture, "a store locked at open: one warning, no history", "[memory][history][locked]") {
  make_store(path, 3);
  LockHolder holder(path, "PRAGMA locking_mode = EXCLUSIVE; BEGIN EXCLUSIVE;");
  expect_no_history(path, "locked");
  holder.release();
  CHECK(HistoryDatabase::open(path, {}).snapshot.size() == 3);  // it was only locked
}

TEST_CASE_METHOD(test::StoreFixture, "a store locked while writing keeps its records for the next round", "[memory][history][locked]") {
  SECTION("the lock goes away: everything is written, no warning") {
    {
      HistoryStore store(path, quick_options(), warnings.sink());
      REQUIRE(store.open_status() == HistoryStatus::kOk);
      LockHolder holder(path, "BEGIN IMMEDIATE");  // another writer's transaction
      for (std::uint64_t n = 1; n <= 20; ++n) store.record(test::test_key(n), kMiB, 1);
      CHECK_FALSE(store.flush());  // busy: kept
      CHECK(store.recording());
      holder.release();
      CHECK(store.flush());
    }
    CHECK(warnings.messages().empty());
    CHECK(HistoryDatabase::open(path, {}).snapshot.size() == 20);
  }
  SECTION("still locked when the pool closes: those records go, with one warning") {
    std::optional<HistoryStore> store;
    store.emplace(path, quick_options(), warnings.sink());
    REQUIRE(store->open_status() == HistoryStatus::kOk);
    LockHolder holder(path, "BEGIN IMMEDIATE");
    for (std::uint64_t n = 1; n <= 5; ++n) store->record(test::test_key(n), kMiB, 1);
    CHECK_FALSE(store->flush());
    store.reset();  // the pool closes while the lock is held
    const std::vector<std::string> messages = warnings.messages();
    REQUIRE(messages.size() == 1);
    CHECK(messages[0].find("5 measurements not saved") != std::string::npos);
  }
}

}  // namespace
}  // namespace spawnpool::detail
