// What the memory tests share: fake memory and pressure sources, a collector for
// HistoryStore's warning, direct SQLite access to prepare and inspect store files, test
// keys, and a guard under which file modes bind root too (these tests run as root, who
// otherwise writes a 0444 file). Header-only; Warnings is thread-safe, the rest is for
// the test's main thread.
#pragma once

#include <linux/capability.h>
#include <sqlite3.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/src/history/history_store.h"
#include "engine/src/admission/budget_meter.h"
#include "engine/src/admission/memory_pressure.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {

/// The driver's cgroup as the test sets it: reads `*reading` each time.
class FakeCgroup : public detail::CgroupMemorySource {
 public:
  explicit FakeCgroup(const Reading* reading) : reading_(reading) {}
  Reading read() override { return *reading_; }

 private:
  const Reading* reading_;
};

/// MemAvailable as the test sets it; counts readings.
class FakeSystemMemory : public detail::SystemMemorySource {
 public:
  FakeSystemMemory(const std::optional<std::uint64_t>* available, int* reads)
      : available_(available), reads_(reads) {}
  std::optional<std::uint64_t> available_bytes() override {
    if (reads_) ++*reads_;
    return *available_;
  }

 private:
  const std::optional<std::uint64_t>* available_;
  int* reads_;
};

/// `some avg10` as the test sets it; counts readings.
class FakePressure : public detail::PressureSource {
 public:
  FakePressure(const std::optional<double>* avg10, int* reads) : avg10_(avg10), reads_(reads) {}
  std::optional<double> some_avg10() override {
    if (reads_) ++*reads_;
    return *avg10_;
  }

 private:
  const std::optional<double>* avg10_;
  int* reads_;
};

/// Collects HistoryStore warnings (from any thread).
class Warnings {
 public:
  detail::HistoryWarning sink() {
    return [this](const std::string& message) {
      std::lock_guard<std::mutex> lock(mutex_);
      messages_.push_back(message);
    };
  }
  std::vector<std::string> messages() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return messages_;
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> messages_;
};

/// Runs `statements` on the SQLite file at `path` through a connection of its own; the
/// first column of the first row any of them returned, as text ("" if none). A failure
/// comes back as "error: <message>".
inline std::string sql(const std::string& path, const std::string& statements) {
  sqlite3* db = nullptr;
  std::string first;
  bool have_first = false;
  int code = sqlite3_open(path.c_str(), &db);
  if (code == SQLITE_OK) {
    auto keep_first = [](void* out, int columns, char** values, char**) {
      auto* state = static_cast<std::pair<std::string*, bool*>*>(out);
      if (!*state->second && columns > 0) {
        *state->first = values[0] ? values[0] : "NULL";
        *state->second = true;
      }
      return 0;
    };
    std::pair<std::string*, bool*> state{&first, &have_first};
    code = sqlite3_exec(db, statements.c_str(), keep_first, &state, nullptr);
  }
  if (code != SQLITE_OK) first = std::string("error: ") + sqlite3_errmsg(db);
  sqlite3_close(db);
  return first;
}

/// A store path in a fresh directory and a collector for the store's warnings: the
/// fixture of the store tests (TEST_CASE_METHOD).
struct StoreFixture {
  TempDir dir;
  std::string path = dir / "history.sqlite";
  Warnings warnings;
};

/// Store options for tests: the writer writes within `flush_ms`, and waits at most
/// `busy_ms` for another connection's lock.
inline detail::HistoryStoreOptions store_options(int flush_ms, int busy_ms) {
  detail::HistoryStoreOptions options;
  options.flush_interval = std::chrono::milliseconds(flush_ms);
  options.database.busy_timeout_ms = busy_ms;
  return options;
}

/// A test key: distinct exact keys for distinct `n`; `fallback` 0 for none.
inline detail::CommandKey test_key(std::uint64_t n, std::uint64_t fallback = 0) {
  detail::CommandKey key;
  key.exact = n;
  key.fallback = fallback;
  key.program = 7;
  return key;
}

/// While alive, the calling thread (and threads it starts) lacks CAP_DAC_OVERRIDE and
/// CAP_DAC_READ_SEARCH, so root is held to file modes as their owner is.
class FileModesBind {
 public:
  FileModesBind() {
    header_.version = _LINUX_CAPABILITY_VERSION_3;
    header_.pid = 0;
    if (syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct reduced[2] = {saved_[0], saved_[1]};
    reduced[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    active_ = syscall(SYS_capset, &header_, reduced) == 0;
  }
  ~FileModesBind() {
    if (active_) syscall(SYS_capset, &header_, saved_);
  }
  FileModesBind(const FileModesBind&) = delete;
  FileModesBind& operator=(const FileModesBind&) = delete;
  /// Whether a write to a 0444 file would now fail (false: the guard could not help).
  bool binding() const { return active_ || geteuid() != 0; }

 private:
  __user_cap_header_struct header_{};
  __user_cap_data_struct saved_[2]{};
  bool active_ = false;
};

}  // namespace spawnpool::test
