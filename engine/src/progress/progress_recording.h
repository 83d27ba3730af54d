// A recording of what one BuildProgress was told (issue 18's ETA benchmark): every call
// that feeds it, with the time it came and what the history answered for it, so that
// the same build can be fed again, offline and in milliseconds, to the same estimator
// (ProgressReplay): the ETA is tuned against real builds without running them again.
// A recording is self-contained: it holds the history's durations the build looked up
// (not the history itself), and no command line. What it cannot replay: a make
// jobserver's token waits (a count asked for at each view; only whether there was a
// jobserver is kept).
//
// The text format, one event a line, times in monotonic ns, numbers in decimal:
//   spawnpool-progress-recording 1
//   B t targets_key units tail_ns    begin(): the build (re)starts at t; the last
//                                    build's units and tail (BuildShape; tail_ns is
//                                    absent in older recordings: read as 0)
//   L exact duration_ns output       after B: one command of the last build of those
//                                    targets, its learned duration (0: none) and the
//                                    file it writes (0: none; absent in older ones)
//   P t slots memory_admission       set_slots()
//   J t 0|1                          a jobserver's token waits set (1) or cleared (0)
//   E t commands|-                   set_expected_remaining() ('-': unset)
//   S t id exact fallback program exact_ns fallback_ns output
//                                    submitted(): the command's keys and the history's
//                                    durations of its exact and fallback keys (0: none);
//                                    its output key (absent in older recordings: 0)
//   O t output_key duration_ns       expect_outputs(): one file expected, and the
//                                    history's duration for it (0: none)
//   R t id                           started() at t
//   F t id failed duration_ns        finished()
//   N t units                        set_units_built()
//   X t                              finish()
//   Z t                              the recording ends (the driver is about to exit)
// Writing: ProgressRecorder, called by BuildProgress under its lock (one fprintf a call,
// buffered). Reading: read_recording(). Neither is thread-safe on its own.
#pragma once

#include <cstdint>
#include <cstdio>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "engine/src/history/history_store_key.h"
#include "engine/src/history/history_store_snapshot.h"

namespace spawnpool::detail {

class ProgressRecorder {
 public:
  /// Opens (truncates) `path`; check ok(). The file is closed by the destructor or end().
  explicit ProgressRecorder(const std::string& path);
  ~ProgressRecorder();
  ProgressRecorder(const ProgressRecorder&) = delete;
  ProgressRecorder& operator=(const ProgressRecorder&) = delete;
  bool ok() const { return file_ != nullptr; }

  /// `last` (may be null): the last build of the targets, with `durations_ns` its
  /// commands' learned durations and `outputs` their output keys (the same order as
  /// last->exact_keys; 0: none).
  void begin(std::int64_t t, std::uint64_t targets_key, const BuildShape* last,
             const std::vector<std::int64_t>& durations_ns, const std::vector<std::uint64_t>& outputs);
  void slots(std::int64_t t, std::size_t slots, bool memory_admission);
  void token_waits(std::int64_t t, bool set);
  void expected(std::int64_t t, std::optional<std::uint64_t> commands);
  void submitted(std::int64_t t, std::uint64_t id, const CommandKey& key, std::int64_t exact_ns,
                 std::int64_t fallback_ns);
  void started(std::int64_t t, std::uint64_t id);
  void finished(std::int64_t t, std::uint64_t id, bool failed, std::int64_t duration_ns);
  void units(std::int64_t t, std::uint64_t units);
  void expected_output(std::int64_t t, std::uint64_t output_key, std::int64_t duration_ns);
  void finish(std::int64_t t);
  /// Writes the end event and closes the file; later calls write nothing.
  void end(std::int64_t t);

 private:
  std::FILE* file_ = nullptr;
};

/// One event of a recording (the fields its kind uses; see the format above).
struct RecordedEvent {
  char kind = 0;  // B P J E S R F N O X Z
  std::int64_t t = 0;
  std::uint64_t id = 0;            // S R F; B: targets_key; P: slots; N: units; O: output key
  std::optional<std::uint64_t> count;  // E; B: units of the last build
  CommandKey key;                  // S
  bool flag = false;               // P: memory admission; J: set; F: failed
  std::int64_t duration_ns = 0;    // F; O: the history's duration
};

struct Recording {
  std::vector<RecordedEvent> events;  // in the order they were recorded
  /// What the history answered during the build: the durations of the keys it was asked
  /// about and the shapes of the last builds, as a snapshot a replay's BuildProgress reads.
  HistorySnapshot history;
  /// The build's start (its last begin event), its end (Z, else X, else the last event).
  std::int64_t start_ns = 0, end_ns = 0;
};

/// Parses a recording; unset with `error` (when not null) saying which line is wrong.
std::optional<Recording> read_recording(std::istream& in, std::string* error);

}  // namespace spawnpool::detail
