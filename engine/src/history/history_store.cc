#include "engine/src/history/history_store.h"

#include <time.h>

#include <algorithm>

namespace spawnpool::detail {

HistoryStore::HistoryStore(const std::string& path, HistoryStoreOptions options,
                           HistoryWarning warn)
    : warn_(std::move(warn)), options_(options) {
  HistoryOpenResult opened = HistoryDatabase::open(path, options_.database);
  open_status_ = opened.status;
  auto snapshot = std::make_shared<HistorySnapshot>(std::move(opened.snapshot));
  const bool empty = snapshot->empty();
  shared_snapshot_ = std::move(snapshot);
  switch (opened.status) {
    case HistoryStatus::kOk:
      break;
    case HistoryStatus::kReadOnly:
      warn_once(opened.problem + (empty
                                      ? "; running without memory history"
                                      : "; using what it holds, recording nothing new"));
      break;
    case HistoryStatus::kBusy:
      warn_once(opened.problem + "; running without memory history");
      break;
    case HistoryStatus::kUnusable:
      warn_once(opened.problem + "; running without memory history");
      break;
  }
  if (opened.database) {
    database_ = std::move(opened.database);
    writing_ = true;
    writer_ = std::thread([this] { writer_loop(); });
  }
}

HistoryStore::~HistoryStore() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_writer_.notify_one();
  if (writer_.joinable()) writer_.join();
}

HistorySnapshot HistoryStore::take_snapshot() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (snapshot_taken_) return HistorySnapshot();
  snapshot_taken_ = true;
  return *shared_snapshot_;
}

void HistoryStore::record(const CommandKey& key, std::int64_t peak_bytes,
                          std::int64_t duration_ns) {
  if (peak_bytes <= 0 && duration_ns <= 0) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!writing_) return;
  if (pending_.size() >= options_.max_pending) {
    // The store has been locked for long: keep the newer half (amortized O(1)).
    const std::size_t dropped = pending_.size() / 2 + 1;
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(dropped));
    settled_ += dropped;
  }
  pending_.push_back({key.exact, key.fallback, std::max<std::int64_t>(peak_bytes, 0),
                      std::max<std::int64_t>(duration_ns, 0), 0, key.output});
  ++recorded_;
  if (pending_.size() == 1 || pending_.size() == options_.flush_batch) wake_writer_.notify_one();
}

void HistoryStore::record_build(std::uint64_t targets_key, BuildShape shape) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!writing_) return;
  for (BuildRecord& pending : pending_builds_) {
    if (pending.targets_key == targets_key) {
      pending.shape = std::move(shape);
      return;
    }
  }
  pending_builds_.push_back({targets_key, std::move(shape), 0});
  ++recorded_;
  wake_writer_.notify_one();
}

bool HistoryStore::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!writing_) return false;
  const std::uint64_t target = recorded_;
  if (settled_ >= target) return true;  // nothing pending: no request left to go stale
  const std::uint64_t round = rounds_;
  flush_target_ = std::max(flush_target_, target);
  wake_writer_.notify_one();
  // The round under way may have taken its batch before the last record: the one after
  // it has everything.
  round_done_.wait(lock, [&] { return settled_ >= target || !writing_ || rounds_ >= round + 2; });
  return writing_ && settled_ >= target;
}

bool HistoryStore::recording() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return writing_;
}

void HistoryStore::warn_once(const std::string& message) {
  std::call_once(warned_, [&] {
    if (warn_) warn_(message);
  });
}

// First SQLite's structure check (it reads the whole file, so here rather than on the
// pool's start path). Then each round: sleep until a record arrives, gather for up to
// flush_interval (or until flush_batch are pending, a flush() or the end), write the
// batch in one transaction outside the lock, and settle it: written, put back (locked:
// retried next round), or given up for good (the one warning; recording stops).
void HistoryStore::writer_loop() {
  std::string problem;
  const HistoryStatus checked = database_->check(problem);
  std::unique_lock<std::mutex> lock(mutex_);
  if (checked != HistoryStatus::kOk && checked != HistoryStatus::kBusy)
    return give_up(lock, problem + "; recording no memory history");
  std::vector<HistoryRecord> batch;
  std::vector<BuildRecord> builds;
  for (;;) {
    wake_writer_.wait(lock, [&] {
      return stop_ || flush_target_ > settled_ || !pending_.empty() || !pending_builds_.empty();
    });
    wake_writer_.wait_for(lock, options_.flush_interval, [&] {
      return stop_ || flush_target_ > settled_ || pending_.size() >= options_.flush_batch;
    });
    const bool stopping = stop_;
    batch.swap(pending_);
    builds.swap(pending_builds_);
    lock.unlock();

    HistoryStatus status = HistoryStatus::kOk;
    if (!batch.empty() || !builds.empty()) {
      timespec now{};
      clock_gettime(CLOCK_REALTIME, &now);  // wall time: shared by processes and builds
      const std::int64_t now_ms = std::int64_t(now.tv_sec) * 1000 + now.tv_nsec / 1000000;
      for (HistoryRecord& record : batch) record.used_at_ms = now_ms;
      for (BuildRecord& build : builds) build.used_at_ms = now_ms;
      status = database_->write(batch, builds, problem);
    }

    lock.lock();
    if (status == HistoryStatus::kOk) {
      settled_ += batch.size() + builds.size();
      batch.clear();
      builds.clear();
    } else if (status == HistoryStatus::kBusy && !stopping) {
      // The flushes waiting give up after this round and the next; the next waits its
      // interval rather than retrying at once against a locked store.
      flush_target_ = settled_;
      batch.insert(batch.end(), pending_.begin(), pending_.end());  // oldest first again
      pending_.swap(batch);
      batch.clear();
      for (BuildRecord& build : pending_builds_) builds.push_back(std::move(build));
      pending_builds_.swap(builds);  // (a newer shape of the same targets: both, in order)
      builds.clear();
    } else {
      settled_ += builds.size();
      builds.clear();
      pending_.insert(pending_.begin(), batch.begin(), batch.end());
      return give_up(lock, problem + "; " + std::to_string(pending_.size()) +
                               " measurements not saved, recording no more memory history");
    }
    ++rounds_;
    round_done_.notify_all();
    if (stopping) {
      lock.unlock();
      database_.reset();  // closing checkpoints the WAL: not under the lock
      return;
    }
  }
}

// On the writer thread, with `lock` held: drops what is pending, stops recording, and
// warns (outside the lock).
void HistoryStore::give_up(std::unique_lock<std::mutex>& lock, const std::string& warning) {
  settled_ += pending_.size() + pending_builds_.size();
  pending_.clear();
  pending_builds_.clear();
  writing_ = false;
  ++rounds_;
  round_done_.notify_all();
  lock.unlock();
  database_.reset();
  warn_once(warning);
}

}  // namespace spawnpool::detail
