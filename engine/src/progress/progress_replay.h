// A recorded build (progress_recording.h) fed again to a BuildProgress of its own, as
// the pool and the driver fed the original: the same calls at the same times, the
// history's answers from the recording. view_at(t) is the status line's view at t of the
// build as far as it had come then; with the estimator unchanged, that is what the
// build's own line computed at t. For tuning the ETA against real builds offline
// (tests/unit/progress/eta_replay.cc) and for tests. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "engine/src/progress/build_progress.h"
#include "engine/src/progress/progress_recording.h"

namespace spawnpool::detail {

class ProgressReplay {
 public:
  /// `exact_count`: the driver's expectations (E events) are replaced by what the build
  /// really ran after them (to tell the count's share of an ETA's error from the rest).
  explicit ProgressReplay(const Recording& recording, bool exact_count = false);

  /// Feeds the events up to `t` (monotonic ns, not before the last call's) and returns
  /// the view at `t`.
  StatusView view_at(std::int64_t t);
  /// The commands the recorded build ran (submitted after its last begin).
  std::uint64_t commands_run() const { return commands_run_; }

 private:
  void apply(const RecordedEvent& event);

  const Recording& recording_;
  std::shared_ptr<BuildProgress> progress_;
  std::size_t next_ = 0;  // the next event to feed
  std::unordered_map<std::uint64_t, std::uint64_t> ids_;  // recorded id -> the replay's
  std::uint64_t commands_run_ = 0;
  bool exact_count_ = false;
  std::uint64_t submitted_ = 0;  // since the last begin
};

}  // namespace spawnpool::detail
