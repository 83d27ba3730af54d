// The progress of one build (issue 18): the commands submitted, started, finished and
// failed, the running ones with their start times, the ones waiting for memory, and what
// the rest is predicted to take (the history's durations, the last build of the same
// targets); view() gives the status line's StatusView with the ETA (eta_estimator.h).
// Fed by the build's pools (submitted, started, finished: PoolOptions::progress) and by
// the driver (how many commands it still expects). Spans pools: a resized build hands the
// same BuildProgress to its next pool. Thread-safe: one mutex; every call but view() is
// a lock and O(1) work; view() is O(active commands + the last build's commands) under
// the lock, and sorts only the queued commands (the last build's are kept in order); its
// estimate (eta_estimator.h) is made after the lock is released. changes() counts
// what changed the view but the clock, so that the status line is drawn again only then
// or when its clock moves (status_printer.h).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/src/history/history_store.h"
#include "engine/src/progress/duration_fit.h"
#include "engine/src/progress/progress_recording.h"
#include "engine/src/progress/status_format.h"

namespace spawnpool::detail {

class BuildProgress {
 public:
  /// `history` (may be null) gives the learned durations and the last build of the
  /// targets `targets_key` names (0: nothing names them; no shape is read or kept).
  /// The build's clock starts at `start_ns` (monotonic).
  BuildProgress(std::shared_ptr<HistoryStore> history, std::uint64_t targets_key,
                std::int64_t start_ns);
  /// The same, reading the durations and shapes of `snapshot` and writing no history
  /// (a replay of a recorded build: progress_replay.h).
  BuildProgress(HistorySnapshot snapshot, std::uint64_t targets_key, std::int64_t start_ns);

  /// Records every call that feeds this progress from now on to the file `path`
  /// (progress_recording.h), starting with the build's begin as it stands; false: the
  /// file cannot be written (nothing is recorded). For the ETA benchmark: start it
  /// before the build's begin() and first command. The calls that are given no time
  /// (submitted, finished, ...) are stamped with `clock()` (monotonic ns, as the pool's
  /// times; a test's own clock for a test's made-up times).
  bool record_to(const std::string& path, std::function<std::int64_t()> clock = {});
  /// Ends the recording at `now_ns` (the driver is done); nothing more is recorded.
  void end_recording(std::int64_t now_ns);

  /// The build starts again at `now_ns`, for the targets `targets_key` names: what was
  /// counted before (a driver's configuration checks) is forgotten, and the last build of
  /// these targets is looked up. For drivers that know their targets only once commands
  /// have already run.
  void begin(std::uint64_t targets_key, std::int64_t now_ns);

  /// The pool's slots, and whether memory admission may hold commands back.
  void set_slots(std::size_t slots, bool memory_admission);
  /// How many queued commands wait for a make jobserver token, as the admission of the
  /// pool `owner` (its scheduler) says when the view is taken; called with this object's
  /// lock held, so it must not call back into it. A resized build's next pool replaces
  /// it; clear_token_waits(owner) (the pool closes) removes it if it is still that
  /// pool's. Unset: none wait for one.
  void set_token_waits(const void* owner, std::function<std::uint64_t()> waits);
  void clear_token_waits(const void* owner);
  /// The driver's count of the commands still to come beyond those submitted (SCons:
  /// the nodes left to evaluate); unset: the last build's commands not seen yet.
  void set_expected_remaining(std::optional<std::uint64_t> commands);

  /// Files the driver expects its commands still to come to write (CommandKey::output
  /// keys: hash_output_path of their absolute paths; SCons: the targets of the units
  /// known out of date). Each one the history knows stands for one of the commands to
  /// come with its own learned duration, until a command writing it is submitted: the
  /// ETA then knows which commands are coming, not only how many. Adds to those given
  /// since the last begin.
  void expect_outputs(const std::vector<std::uint64_t>& output_keys);

  /// A command entered the pool (queued); returns its id for started() and finished().
  std::uint64_t submitted(const CommandKey& key, const std::string& line);
  /// How many of its own units the driver built (kept with the build's shape).
  void set_units_built(std::uint64_t units);
  /// The last build of these targets: its commands and units (0, 0: none known).
  std::pair<std::uint64_t, std::uint64_t> last_build() const;
  /// The driver's account of its units by kind, kept with the build's shape as given
  /// (BuildShape::kinds; not in a recording: a replay does not count units).
  void set_unit_kinds(std::string kinds);
  /// The last build's account by kind ("": none known).
  std::string last_build_kinds() const;

  /// It got a slot, at `now_ns`.
  void started(std::uint64_t id, std::int64_t now_ns);
  /// It ended (a command that never started too: `duration_ns` 0).
  void finished(std::uint64_t id, bool failed, std::int64_t duration_ns);

  /// The status line's view at `now_ns`.
  StatusView view(std::int64_t now_ns) const;
  /// The build is over: the total becomes what ran (N = M), and its shape (the exact keys
  /// of what ran) goes into the history. Idempotent; the view afterwards is the final one.
  StatusView finish(std::int64_t now_ns);

  std::uint64_t failed() const;

  /// How many times what the view shows changed, the clock aside (a command submitted,
  /// started or finished, the driver's expectation, the slots, a new begin); lock-free.
  std::uint64_t changes() const { return changes_.load(std::memory_order_acquire); }
  /// `listener` (nullptr: none) is called at the first change after each
  /// listen_for_change(), from the thread making the change, with this object's lock
  /// held: it must not call back into it, nor take a lock held around calls into it.
  void set_change_listener(std::function<void()> listener);
  void listen_for_change();

 private:
  struct Command {
    std::optional<double> predicted_s;  // the history's duration of it
    std::uint64_t program = 0;          // CommandKey::program
    std::int64_t started_ns = 0;        // 0: queued
    std::string line;
  };
  std::optional<double> program_median(std::uint64_t program) const;  // mutex_ held
  std::optional<double> typical_s() const;                            // mutex_ held
  /// The last build's not seen, from `from` on, shortest first (not those expected by
  /// output); mutex_ held.
  std::vector<double> unseen_predictions(std::size_t from = 0) const;
  std::vector<double> expected_predictions(std::uint64_t to_come) const;  // mutex_ held

  std::shared_ptr<HistoryStore> history_;
  std::shared_ptr<const HistorySnapshot> snapshot_;  // never null
  void begin_locked(std::uint64_t targets_key, std::int64_t now_ns);  // mutex_ held

  mutable std::mutex mutex_;
  std::uint64_t targets_key_ = 0;                     // guarded by mutex_
  std::int64_t start_ns_ = 0;                         // guarded by mutex_
  std::size_t slots_ = 1;                             // guarded by mutex_
  bool memory_admission_ = false;                     // guarded by mutex_
  std::optional<std::uint64_t> expected_remaining_;   // guarded by mutex_
  const void* token_waits_owner_ = nullptr;           // guarded by mutex_
  std::function<std::uint64_t()> token_waits_;        // guarded by mutex_
  std::uint64_t next_id_ = 1;                         // guarded by mutex_
  std::uint64_t done_ = 0, failed_ = 0;               // guarded by mutex_
  std::map<std::uint64_t, Command> active_;           // queued and running, by id; guarded
  /// The last build of these targets, command by command in the order they were
  /// submitted: each one's learned duration (seconds; 0: none) and whether a command
  /// of this build with its exact key has taken its place (the first occurrences
  /// first). Guarded by mutex_.
  std::vector<double> last_durations_;
  std::vector<std::uint8_t> last_seen_;
  /// Each one's output key (0: none known), and whether it is among the expected outputs
  /// (expect_outputs: those predict the command that writes it, so its last-build
  /// position stands in for nothing else).
  std::vector<std::uint64_t> last_outputs_;
  std::vector<std::uint8_t> last_expected_;
  /// The positions of last_durations_ that have a duration, shortest first (sorted once
  /// per begin, so that a view reads the predictions to come in order: no sort per view).
  std::vector<std::uint32_t> by_duration_;  // guarded by mutex_
  /// The expected outputs the history knows (expect_outputs), shortest first: each one's
  /// learned duration and whether a command writing it has been submitted; and each
  /// output key's position among them. Guarded by mutex_.
  struct ExpectedOutput {
    double duration_s;
    std::uint64_t key;
    bool seen;
  };
  std::vector<ExpectedOutput> outputs_;
  std::unordered_map<std::uint64_t, std::uint32_t> output_position_;
  std::uint64_t outputs_left_ = 0;  // not seen; guarded by mutex_
  std::vector<double> expected_outputs() const;  // mutex_ held: the unseen, shortest first
  /// Exact key -> its positions in the last build not seen in this one, latest first.
  std::unordered_map<std::uint64_t, std::vector<std::uint32_t>> unseen_;  // guarded
  std::uint64_t unseen_count_ = 0;                    // positions not seen; guarded
  /// Durations of this build's finished commands, by program (seconds), and their count.
  std::unordered_map<std::uint64_t, std::vector<double>> by_program_;  // guarded by mutex_
  std::uint64_t timed_ = 0;  // finished commands with a duration (busy_s_ sums them); guarded
  /// The finished commands that had a prediction when they ended (the history's, or
  /// their program's median before them): their durations against their predictions.
  DurationFit fit_;                                   // guarded by mutex_
  DurationLine calibration() const;                   // mutex_ held
  /// The slots' busy time: the finished commands' durations, since the first started.
  double busy_s_ = 0;                                 // guarded by mutex_
  std::int64_t first_started_ns_ = 0;                 // 0: none yet; guarded by mutex_
  double pace(std::int64_t now_ns, double running_s) const;  // mutex_ held
  /// When this build's last command to finish ended (its start plus its duration; 0:
  /// none yet), and the last build's tail (BuildShape::tail_ns, seconds; 0: unknown).
  std::int64_t last_end_ns_ = 0;                      // guarded by mutex_
  double last_tail_s_ = 0;                            // guarded by mutex_
  double tail_s(std::int64_t now_ns, std::uint64_t to_come, const DurationLine& line) const;  // mutex_ held
  std::vector<std::uint64_t> ran_;                    // exact keys, in submission order
  std::uint64_t units_built_ = 0;                     // guarded by mutex_
  std::string unit_kinds_;                            // guarded by mutex_
  std::string last_build_kinds_;                      // guarded by mutex_
  std::pair<std::uint64_t, std::uint64_t> last_build_;  // guarded by mutex_
  std::optional<StatusView> final_;                   // set by finish(); guarded
  std::atomic<std::uint64_t> changes_{0};             // written under mutex_
  std::atomic<bool> listening_{false};                // the listener waits for a change
  std::function<void()> change_listener_;             // guarded by mutex_
  void changed();                                     // mutex_ held
  std::unique_ptr<ProgressRecorder> recorder_;        // null: not recording; guarded
  std::function<std::int64_t()> record_clock_;        // stamps for recorder_; guarded
  void record_begin() const;                          // mutex_ held, recorder_ set
  void record_submitted(std::uint64_t id, const CommandKey& key) const;  // the same
};

/// A targets key for a driver's list of targets and its top directory (any order of
/// the targets gives the same key).
std::uint64_t hash_targets(const std::string& top_dir, std::vector<std::string> targets);

}  // namespace spawnpool::detail
