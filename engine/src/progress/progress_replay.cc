#include "engine/src/progress/progress_replay.h"

#include <algorithm>

namespace spawnpool::detail {

ProgressReplay::ProgressReplay(const Recording& recording, bool exact_count)
    : recording_(recording),
      progress_(std::make_shared<BuildProgress>(recording.history, 0,
                                                recording.events.empty() ? 0 : recording.events.front().t)) {
  for (const RecordedEvent& event : recording_.events) {
    if (event.kind == 'B') commands_run_ = 0;
    if (event.kind == 'S') ++commands_run_;
  }
  exact_count_ = exact_count;
}

StatusView ProgressReplay::view_at(std::int64_t t) {
  while (next_ < recording_.events.size() && recording_.events[next_].t <= t) apply(recording_.events[next_++]);
  return progress_->view(t);
}

void ProgressReplay::apply(const RecordedEvent& e) {
  switch (e.kind) {
    case 'B':
      progress_->begin(e.id, e.t);
      submitted_ = 0;
      if (exact_count_) progress_->set_expected_remaining(commands_run_);
      break;
    case 'P': progress_->set_slots(static_cast<std::size_t>(e.id), e.flag); break;
    case 'J':
      // The count is not recorded; that there is a jobserver changes the pace (no idle share).
      if (e.flag)
        progress_->set_token_waits(this, [] { return std::uint64_t{0}; });
      else
        progress_->clear_token_waits(this);
      break;
    case 'E':
      if (!exact_count_) progress_->set_expected_remaining(e.count);
      break;
    case 'S':
      ids_[e.id] = progress_->submitted(e.key, std::string());
      ++submitted_;
      if (exact_count_) progress_->set_expected_remaining(commands_run_ - std::min(submitted_, commands_run_));
      break;
    case 'R':
      if (const auto it = ids_.find(e.id); it != ids_.end()) progress_->started(it->second, e.t);
      break;
    case 'F':
      if (const auto it = ids_.find(e.id); it != ids_.end()) {
        progress_->finished(it->second, e.flag, e.duration_ns);
        ids_.erase(it);
      }
      break;
    case 'N': progress_->set_units_built(e.id); break;
    case 'O': progress_->expect_outputs({e.id}); break;
    case 'X': progress_->finish(e.t); break;
    default: break;  // Z: nothing to feed
  }
}

}  // namespace spawnpool::detail
