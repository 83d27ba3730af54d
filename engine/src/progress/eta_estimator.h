// The ETA of a build (issue 18 item 3): the predicted work that remains, placed on the
// build's slots, not elapsed / fraction done. The running commands keep their slots for
// what their predictions leave; the commands still to run go, longest first, each on
// the slot that frees first (list scheduling), at most `parallelism` at once (fewer
// than the slots while memory admission holds commands back). The answer is when the
// last slot frees. Every duration is scaled by the build's pace so far (its commands'
// durations over their predictions): the history's durations come from other builds,
// under another load, and the median that stands in for an unknown command is below
// the mean of a right-skewed mix (compiles). Pure function: thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

namespace spawnpool::detail {

struct RunningWork {
  double elapsed_s = 0;                 ///< how long it has run
  std::optional<double> predicted_s;    ///< its learned duration; unset: unknown
};

struct EtaInput {
  /// Commands that may run at once: the slots, or fewer while memory admission (or a
  /// jobserver) keeps the build narrower; at least 1.
  std::size_t parallelism = 1;
  std::vector<RunningWork> running;
  /// Predicted durations of the commands still to run (queued, or not yet handed to
  /// the pool), in any order.
  std::vector<double> pending_s;
  /// Commands still to run that nothing predicts (no history, no command of the same
  /// program finished).
  std::size_t pending_unknown = 0;
  /// The duration of a typical command of this build (the median of those finished,
  /// else of the history's): stands in for what nothing predicts. Unset: none known.
  std::optional<double> typical_s;
  /// How much longer this build's commands take than predicted (their durations over
  /// what was predicted for them: a loaded machine, a history from a quicker build, the
  /// median standing in for a mean): every duration above is multiplied by it. 1: as
  /// predicted, or too few finished to tell.
  double pace = 1;
};

/// Seconds until the build ends, or unset ("no estimate yet") when the input cannot
/// support a number: commands nothing predicts and no typical duration to stand in.
std::optional<double> estimate_remaining_s(const EtaInput& input);

}  // namespace spawnpool::detail
