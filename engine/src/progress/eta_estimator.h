// The ETA of a build (issue 18 item 3): the predicted work that remains, placed on the
// build's slots, not elapsed / fraction done. The running commands keep their slots for
// what their predictions leave; the commands still to run go, longest first, each on
// the slot that frees first (list scheduling), at most `parallelism` at once (fewer
// than the slots while memory admission holds commands back). The answer is when the
// last slot frees, plus the driver's own tail after it. Every duration is scaled by the
// build's pace (how much longer than its commands the build takes on its slots: the
// driver's own work between commands leaves slots idle). The durations given are the
// caller's best: BuildProgress puts the history's through a line fitted to this build's
// finished commands (duration_fit.h). Pure function: thread-safe.
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
  /// the pool), in any order; longest first spares the estimator its sort.
  std::vector<double> pending_s;
  /// Commands still to run that nothing predicts (no history, no command of the same
  /// program finished).
  std::size_t pending_unknown = 0;
  /// The duration of a typical command of this build (the mean of those finished, else
  /// the median of the history's): stands in for what nothing predicts. Unset: none known.
  std::optional<double> typical_s;
  /// How much longer the build takes than its commands' durations on the slots (the
  /// slots' idle share so far: BuildProgress::pace): every duration above is multiplied
  /// by it. 1: none idle, or too few finished to tell.
  double pace = 1;
  /// The driver's own time after the last command ends, until the build is over (the
  /// last build's: BuildShape::tail_ns, less what has passed of it), added to the last
  /// slot's end. SCons' is 0.1-0.3 s (the nodes left to evaluate, .sconsign written):
  /// the last quarter of a 7-s incremental build, the ETA was that much short.
  double tail_s = 0;
};

/// Seconds until the build ends, or unset ("no estimate yet") when the input cannot
/// support a number: commands nothing predicts and no typical duration to stand in.
std::optional<double> estimate_remaining_s(const EtaInput& input);

}  // namespace spawnpool::detail
