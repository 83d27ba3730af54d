// The memory history store when all goes well: created in WAL mode with its schema
// version, records read back by exact and fallback key, the decayed maximum, the row
// bound (least recently used rows go), flush points, and several processes writing one
// store at once (this binary runs its own hidden writer case as the other processes).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "engine/src/history/history_store.h"
#include "engine/src/history/history_store_database.h"
#include "tests/unit/support/memory_test_support.h"

extern char** environ;

namespace spawnpool::detail {
namespace {

using test::sql;
using test::test_key;

constexpr std::int64_t kMiB = 1 << 20;

// The commands table as every schema since 1 has it: the older stores the migration tests
// start from.
constexpr const char* kSchema1Commands =
    "CREATE TABLE commands (exact_key INTEGER PRIMARY KEY, fallback_key INTEGER,"
    " peak_bytes INTEGER NOT NULL, duration_ns INTEGER NOT NULL, runs INTEGER NOT NULL,"
    " last_used INTEGER NOT NULL);"
    "CREATE INDEX commands_by_last_used ON commands(last_used);";

HistoryStoreOptions fast_options() { return test::store_options(20, 5000); }

TEST_CASE("a new store is made in WAL mode, with its schema version", "[memory][history]") {
  test::TempDir dir;
  const std::string path = dir / "sub/dir/history.sqlite";  // parents are created
  test::Warnings warnings;
  {
    HistoryStore store(path, fast_options(), warnings.sink());
    CHECK(store.open_status() == HistoryStatus::kOk);
    CHECK(store.recording());
    CHECK(store.take_snapshot().empty());
    store.record(test_key(1), 10 * kMiB, 1000);
    CHECK(store.flush());
  }
  CHECK(warnings.messages().empty());
  CHECK(sql(path, "PRAGMA journal_mode") == "wal");
  CHECK(sql(path, "PRAGMA user_version") == std::to_string(HistoryDatabase::kSchemaVersion));
  CHECK(sql(path, "PRAGMA application_id") == std::to_string(HistoryDatabase::kApplicationId));
  CHECK(sql(path, "SELECT count(*) FROM commands") == "1");
  // The last connection checkpointed and removed the WAL files.
  CHECK_FALSE(std::filesystem::exists(path + "-wal"));
  CHECK_FALSE(std::filesystem::exists(path + "-shm"));
}

TEST_CASE_METHOD(test::StoreFixture, "records come back at the next open, by exact and by fallback key", "[memory][history]") {
  {
    HistoryStore store(path, fast_options(), warnings.sink());
    store.record(test_key(1, 100), 10 * kMiB, 111);
    store.record(test_key(2), 20 * kMiB, 222);
    store.record(test_key(3, 300), 0, 0);  // neither peak nor duration: not recorded
    store.record(test_key(4, 300), -5, -1);
  }  // the destructor writes what is pending
  HistoryStore store(path, fast_options(), warnings.sink());
  const HistorySnapshot snapshot = store.take_snapshot();
  CHECK(warnings.messages().empty());
  REQUIRE(snapshot.size() == 2);
  REQUIRE(snapshot.find_exact(1));
  CHECK(snapshot.find_exact(1)->peak_bytes == 10 * kMiB);
  CHECK(snapshot.find_exact(1)->duration_ns == 111);
  REQUIRE(snapshot.find_exact(2));
  CHECK(snapshot.find_exact(2)->peak_bytes == 20 * kMiB);
  CHECK_FALSE(snapshot.find_exact(3));
  REQUIRE(snapshot.find_fallback(100));
  CHECK(snapshot.find_fallback(100)->peak_bytes == 10 * kMiB);
  CHECK_FALSE(snapshot.find_fallback(300));
  CHECK_FALSE(snapshot.find_fallback(0));
  CHECK(store.take_snapshot().empty());  // moved out
}

TEST_CASE_METHOD(test::StoreFixture, "a command measured again keeps max(new peak, 3/4 of the old)", "[memory][history]") {
  HistoryStore store(path, fast_options(), warnings.sink());
  const auto peak_after = [&](std::int64_t peak) {
    store.record(test_key(9), peak, 1);
    REQUIRE(store.flush());
    return std::stoll(sql(path, "SELECT peak_bytes FROM commands WHERE exact_key = 9"));
  };
  CHECK(peak_after(1000 * kMiB) == 1000 * kMiB);
  CHECK(peak_after(500 * kMiB) == 750 * kMiB);        // a spike fades...
  CHECK(peak_after(500 * kMiB) == 562 * kMiB + kMiB / 2);
  CHECK(peak_after(900 * kMiB) == 900 * kMiB);        // ...growth is followed at once
  CHECK(sql(path, "SELECT runs FROM commands WHERE exact_key = 9") == "4");
  CHECK(warnings.messages().empty());
}

TEST_CASE_METHOD(test::StoreFixture, "durations are learned with or without a peak, 3/4 the new run", "[history][duration]") {
  HistoryStore store(path, fast_options(), warnings.sink());
  const auto after = [&](std::int64_t peak, std::int64_t duration) {
    store.record(test_key(7), peak, duration);
    REQUIRE(store.flush());
    return sql(path, "SELECT peak_bytes || ' ' || duration_ns FROM commands WHERE exact_key = 7");
  };
  CHECK(after(0, 4000) == "0 4000");  // without admission: no peak
  CHECK(after(0, 8000) == "0 7000");
  CHECK(after(100 * kMiB, 0) == "104857600 7000");  // a peak alone
  CHECK(after(0, 3000) == "104857600 4000");        // the peak stays
  CHECK(warnings.messages().empty());
  store.flush();
  const HistoryOpenResult opened = HistoryDatabase::open(path, {});
  REQUIRE(opened.snapshot.find_exact(7));
  CHECK(opened.snapshot.find_exact(7)->duration_ns == 4000);
}

TEST_CASE_METHOD(test::StoreFixture, "a build's shape comes back at the next open, the last one per targets", "[history][builds]") {
  {
    HistoryStore store(path, fast_options(), warnings.sink());
    store.record_build(11, BuildShape{{1, 2, 3}, 0, ""});
    store.record_build(22, BuildShape{{4}, 0, ""});
    store.record_build(11, BuildShape{{1, 2, 3, 5}, 3, "o 2 2\na 1 2\n", 250000000});  // replaces the pending one
    CHECK(store.flush());
    store.record_build(22, BuildShape{{}, 0, ""});  // a build that ran nothing
  }
  HistoryStore store(path, fast_options(), warnings.sink());
  const auto snapshot = store.snapshot();
  REQUIRE(snapshot->find_build(11));
  CHECK(snapshot->find_build(11)->exact_keys == std::vector<std::uint64_t>{1, 2, 3, 5});
  CHECK(snapshot->find_build(11)->units == 3);
  CHECK(snapshot->find_build(11)->kinds == "o 2 2\na 1 2\n");
  CHECK(snapshot->find_build(11)->tail_ns == 250000000);
  REQUIRE(snapshot->find_build(22));
  CHECK(snapshot->find_build(22)->tail_ns == 0);
  CHECK(snapshot->find_build(22)->exact_keys.empty());
  CHECK(snapshot->find_build(22)->kinds.empty());
  CHECK_FALSE(snapshot->find_build(33));
  CHECK(warnings.messages().empty());
}

TEST_CASE_METHOD(test::StoreFixture, "a schema 1 store is migrated, its rows kept", "[history][schema]") {
  REQUIRE(sql(path,
              std::string(kSchema1Commands) +
              "INSERT INTO commands VALUES (5, 50, 1048576, 900, 3, 1000);"
              "PRAGMA application_id = 1397771592; PRAGMA user_version = 1;") == "");
  {
    HistoryStore store(path, fast_options(), warnings.sink());
    REQUIRE(store.open_status() == HistoryStatus::kOk);
    REQUIRE(store.snapshot()->find_exact(5));
    CHECK(store.snapshot()->find_exact(5)->duration_ns == 900);
    store.record_build(1, BuildShape{{5}, 0, ""});
  }
  CHECK(sql(path, "PRAGMA user_version") == "5");
  CHECK(sql(path, "SELECT count(*) FROM builds") == "1");
  CHECK(sql(path, "SELECT runs FROM commands WHERE exact_key = 5") == "3");
  CHECK(sql(path, "SELECT output_key FROM commands WHERE exact_key = 5") == "NULL");
  CHECK(warnings.messages().empty());
}

TEST_CASE_METHOD(test::StoreFixture, "a schema 2 store is migrated, its builds kept without kinds", "[history][schema]") {
  REQUIRE(sql(path,
              std::string(kSchema1Commands) +
              "CREATE TABLE builds (targets_key INTEGER PRIMARY KEY, exact_keys BLOB NOT NULL,"
              " units INTEGER NOT NULL, last_used INTEGER NOT NULL);"
              "INSERT INTO commands VALUES (5, 50, 0, 900, 3, 1000);"
              "INSERT INTO builds VALUES (7, x'0500000000000000', 1, 1000);"
              "PRAGMA application_id = 1397771592; PRAGMA user_version = 2;") == "");
  {
    HistoryStore store(path, fast_options(), warnings.sink());
    REQUIRE(store.open_status() == HistoryStatus::kOk);
    REQUIRE(store.snapshot()->find_build(7));
    CHECK(store.snapshot()->find_build(7)->exact_keys == std::vector<std::uint64_t>{5});
    CHECK(store.snapshot()->find_build(7)->units == 1);
    CHECK(store.snapshot()->find_build(7)->kinds.empty());
    store.record_build(8, BuildShape{{5}, 1, "o 1 1\n"});
  }
  CHECK(sql(path, "PRAGMA user_version") == "5");
  CHECK(sql(path, "SELECT kinds FROM builds WHERE targets_key = 7") == "");
  CHECK(sql(path, "SELECT kinds FROM builds WHERE targets_key = 8") == "o 1 1\n");
  CHECK(sql(path, "SELECT tail_ns FROM builds WHERE targets_key = 7") == "0");
  CHECK(warnings.messages().empty());
}

// A driver that knows which files it will build, not which commands, asks by output:
// the command that wrote the file last answers (the ETA's expected outputs, issue 18).
TEST_CASE_METHOD(test::StoreFixture, "a command's duration is found again by its output file", "[history]") {
  const CommandKey compile = hash_command_key({"cc", "-c", "-o", "obj/a.o", "a.c"}, "/top", "cc", "obj/a.o");
  const CommandKey again = hash_command_key({"cc", "-O2", "-c", "-o", "obj/a.o", "a.c"}, "/top", "cc", "obj/a.o");
  const CommandKey archive = hash_command_key({"ar", "rc", "lib.a", "obj/a.o"}, "/top", "ar", "");
  CHECK(compile.output == hash_output_path("/top/obj/a.o"));
  CHECK(compile.output == hash_output_path("./obj/a.o", "/top/"));
  CHECK(compile.output != hash_output_path("/elsewhere/obj/a.o"));
  CHECK(archive.output == 0);  // no output path found: none
  {
    HistoryStore store(path, fast_options(), warnings.sink());
    store.record(compile, 0, 2000);
    store.record(archive, 0, 500);
    CHECK(store.flush());
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // a later last use
    store.record(again, 0, 3000);  // another command writing the same file, later
  }
  HistoryStore store(path, fast_options(), warnings.sink());
  const auto snapshot = store.snapshot();
  REQUIRE(snapshot->find_output(compile.output));
  CHECK(snapshot->find_output(compile.output)->duration_ns == 3000);  // the most recent
  CHECK_FALSE(snapshot->find_output(hash_output_path("/top/obj/b.o")));
  CHECK_FALSE(snapshot->find_output(0));
  CHECK(warnings.messages().empty());
}

TEST_CASE_METHOD(test::StoreFixture, "a schema 3 store is migrated, its builds kept without a tail", "[history][schema]") {
  REQUIRE(sql(path,
              std::string(kSchema1Commands) +
              "CREATE TABLE builds (targets_key INTEGER PRIMARY KEY, exact_keys BLOB NOT NULL,"
              " units INTEGER NOT NULL, last_used INTEGER NOT NULL, kinds TEXT NOT NULL DEFAULT '');"
              "INSERT INTO commands VALUES (5, 50, 0, 900, 3, 1000);"
              "INSERT INTO builds VALUES (7, x'0500000000000000', 1, 1000, 'o 1 1 1 1 o\n');"
              "PRAGMA application_id = 1397771592; PRAGMA user_version = 3;") == "");
  {
    // Its builds come back with no tail (0: unknown), as they are or migrated.
    const HistoryOpenResult read = HistoryDatabase::open(path, {});
    REQUIRE(read.snapshot.find_build(7));
    CHECK(read.snapshot.find_build(7)->kinds == "o 1 1 1 1 o\n");
    CHECK(read.snapshot.find_build(7)->tail_ns == 0);
  }
  {
    HistoryStore store(path, fast_options(), warnings.sink());
    REQUIRE(store.open_status() == HistoryStatus::kOk);
    REQUIRE(store.snapshot()->find_build(7));
    CHECK(store.snapshot()->find_build(7)->tail_ns == 0);
    store.record_build(8, BuildShape{{5}, 1, "o 1 1\n", 120000000});
  }
  CHECK(sql(path, "PRAGMA user_version") == "5");
  CHECK(sql(path, "SELECT kinds || '|' || tail_ns FROM builds WHERE targets_key = 7") == "o 1 1 1 1 o\n|0");
  CHECK(sql(path, "SELECT tail_ns FROM builds WHERE targets_key = 8") == "120000000");
  CHECK(warnings.messages().empty());
}

TEST_CASE_METHOD(test::StoreFixture, "the fallback key finds the most recently used command that had it", "[memory][history]") {
  std::string problem;
  {
    HistoryOpenResult opened = HistoryDatabase::open(path, {});
    REQUIRE(opened.database);
    // Two flag variants of one compile (same fallback key); the newer one is at 2000.
    REQUIRE(opened.database->write({{1, 50, 100 * kMiB, 1, 2000}, {2, 50, 300 * kMiB, 1, 1000}},
                                   problem) == HistoryStatus::kOk);
  }
  const HistoryOpenResult reopened = HistoryDatabase::open(path, {});
  REQUIRE(reopened.snapshot.find_fallback(50));
  CHECK(reopened.snapshot.find_fallback(50)->peak_bytes == 100 * kMiB);
}

TEST_CASE_METHOD(test::StoreFixture, "the store keeps max_rows rows, dropping the least recently used", "[memory][history]") {
  HistoryDatabaseOptions options;
  options.max_rows = 10;
  std::string problem;
  {
    HistoryOpenResult opened = HistoryDatabase::open(path, options);
    REQUIRE(opened.database);
    std::vector<HistoryRecord> batch;
    for (std::uint64_t n = 1; n <= 15; ++n)
      batch.push_back({n, 0, kMiB, 1, static_cast<std::int64_t>(n)});
    REQUIRE(opened.database->write(batch, problem) == HistoryStatus::kOk);
    CHECK(sql(path, "SELECT count(*) FROM commands") == "10");
    CHECK(sql(path, "SELECT min(exact_key) FROM commands") == "6");
    // Command 6 runs again: now command 7 is the least recently used.
    REQUIRE(opened.database->write({{6, 0, kMiB, 1, 100}, {16, 0, kMiB, 1, 101}}, problem) ==
            HistoryStatus::kOk);
  }
  const HistoryOpenResult reopened = HistoryDatabase::open(path, options);
  CHECK(reopened.snapshot.size() == 10);
  CHECK(reopened.snapshot.find_exact(6));
  CHECK_FALSE(reopened.snapshot.find_exact(7));
  CHECK(reopened.snapshot.find_exact(16));
}

TEST_CASE_METHOD(test::StoreFixture, "the store keeps the 64 builds used last, over writes that reuse their statements", "[history][builds]") {
  std::string problem;
  {
    HistoryOpenResult opened = HistoryDatabase::open(path, {});
    REQUIRE(opened.database);
    // One write a build, as a build's writer does: each write after the first runs the
    // statements its first one prepared.
    for (std::uint64_t n = 1; n <= 70; ++n)
      REQUIRE(opened.database->write({{n, 0, kMiB, 1, static_cast<std::int64_t>(n)}},
                                     {{n, BuildShape{{n}, 1, ""}, static_cast<std::int64_t>(n)}},
                                     problem) == HistoryStatus::kOk);
    CHECK(sql(path, "SELECT count(*) FROM builds") == "64");
    CHECK(sql(path, "SELECT min(targets_key) FROM builds") == "7");
    // A write of commands alone leaves the builds as they are, and commits.
    REQUIRE(opened.database->write({{71, 0, kMiB, 1, 71}}, problem) == HistoryStatus::kOk);
    CHECK(sql(path, "SELECT count(*) FROM builds") == "64");
    CHECK(sql(path, "SELECT count(*) FROM commands") == "71");
  }
  const HistoryOpenResult reopened = HistoryDatabase::open(path, {});
  CHECK_FALSE(reopened.snapshot.find_build(6));
  REQUIRE(reopened.snapshot.find_build(70));
  CHECK(reopened.snapshot.find_build(70)->exact_keys == std::vector<std::uint64_t>{70});
  CHECK(reopened.snapshot.find_exact(71));
}

TEST_CASE_METHOD(test::StoreFixture, "flush writes everything recorded before it, and the writer batches on its own", "[memory][history]") {
  HistoryStoreOptions options = fast_options();
  options.flush_batch = 8;
  options.flush_interval = std::chrono::hours(1);  // only the batch size or flush() write
  HistoryStore store(path, options, warnings.sink());
  CHECK(store.flush());  // nothing pending: leaves no request behind for the next round
  store.record(test_key(1), kMiB, 1);
  // Time for the writer to wake on the first record: a stale flush request would have it
  // write that one alone, and the seven after it would wait for the hour.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  for (std::uint64_t n = 2; n <= 8; ++n) store.record(test_key(n), kMiB, 1);
  // A full batch is written without a flush.
  CHECK(test::wait_until([&] { return sql(path, "SELECT count(*) FROM commands") == "8"; }));
  store.record(test_key(100), kMiB, 1);
  CHECK(store.flush());
  CHECK(sql(path, "SELECT count(*) FROM commands") == "9");
  CHECK(warnings.messages().empty());
}

// --- several processes at once -------------------------------------------------------

constexpr int kWriters = 4;
constexpr std::uint64_t kOwnKeys = 300;
constexpr std::uint64_t kSharedKeys = 50;

std::uint64_t own_key(int writer, std::uint64_t n) { return (std::uint64_t(writer + 1) << 32) | n; }
std::uint64_t shared_key(std::uint64_t n) { return (std::uint64_t(99) << 32) | n; }

// Run by the writer processes the next test starts (hidden: not run on its own).
TEST_CASE("history writer process", "[.][history_writer]") {
  const char* path = std::getenv("SPAWNPOOL_TEST_HISTORY");
  const char* id = std::getenv("SPAWNPOOL_TEST_WRITER");
  if (!path || !id) return;
  const int writer = std::atoi(id);
  test::Warnings warnings;
  {
    HistoryStoreOptions options = fast_options();
    options.flush_batch = 16;
    options.flush_interval = std::chrono::milliseconds(1);
    HistoryStore store(path, options, warnings.sink());
    REQUIRE(store.open_status() == HistoryStatus::kOk);
    for (std::uint64_t n = 0; n < kOwnKeys; ++n) {
      store.record(test_key(own_key(writer, n), own_key(writer, n)), (writer + 1) * kMiB, 1);
      if (n < kSharedKeys) store.record(test_key(shared_key(n)), (writer + 1) * kMiB, 1);
      if (n % 64 == 0) CHECK(store.flush());
    }
  }
  CHECK(warnings.messages().empty());
}

TEST_CASE_METHOD(test::StoreFixture, "several processes write one store at once and nothing is lost", "[memory][history][processes]") {
  HistoryStore reader(path, fast_options(), warnings.sink());  // creates it; reads alongside
  char self[] = "/proc/self/exe";
  char spec[] = "[history_writer]";
  char* argv[] = {self, spec, nullptr};
  posix_spawn_file_actions_t quiet;  // Catch's summary of each writer: not ours to print
  posix_spawn_file_actions_init(&quiet);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  std::vector<pid_t> pids;
  for (int writer = 0; writer < kWriters; ++writer) {
    setenv("SPAWNPOOL_TEST_HISTORY", path.c_str(), 1);
    setenv("SPAWNPOOL_TEST_WRITER", std::to_string(writer).c_str(), 1);
    pid_t pid = -1;
    REQUIRE(posix_spawn(&pid, self, &quiet, nullptr, argv, environ) == 0);
    pids.push_back(pid);
  }
  posix_spawn_file_actions_destroy(&quiet);
  unsetenv("SPAWNPOOL_TEST_HISTORY");
  unsetenv("SPAWNPOOL_TEST_WRITER");
  for (int n = 0; n < 50; ++n) reader.record(test_key(n + 1), kMiB, 1);  // a fifth writer
  CHECK(reader.flush());
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  const HistoryOpenResult opened = HistoryDatabase::open(path, {});
  REQUIRE(opened.status == HistoryStatus::kOk);
  CHECK(opened.snapshot.size() == kWriters * kOwnKeys + kSharedKeys + 50);
  for (int writer = 0; writer < kWriters; ++writer)
    for (std::uint64_t n = 0; n < kOwnKeys; n += 37) {
      const HistoryEntry* entry = opened.snapshot.find_exact(own_key(writer, n));
      REQUIRE(entry);
      CHECK(entry->peak_bytes == (writer + 1) * kMiB);
      CHECK(opened.snapshot.find_fallback(own_key(writer, n)));
    }
  CHECK(sql(path, "SELECT sum(runs) FROM commands WHERE exact_key >> 32 = 99") ==
        std::to_string(kWriters * kSharedKeys));
  CHECK(warnings.messages().empty());
}

}  // namespace
}  // namespace spawnpool::detail
