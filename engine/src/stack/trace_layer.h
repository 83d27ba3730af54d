// The trace layer: every result that comes up through it is written to the build's trace
// (trace_writer.h) with the line that ran (recorded_line.h), and with the caller's own
// args for it when a hook is given. It holds no lock of its own (the writer does, only
// for the write) and never fails a command.
#pragma once

#include <functional>
#include <string>

#include "engine/src/stack/layer.h"
#include "engine/src/stack/recorded_line.h"
#include "engine/src/stack/trace_writer.h"
#include "spawnpool/session.h"

namespace spawnpool::detail {

/// More args for the event of a command that ran (spawnpool/session.h says what).
using TraceArgs = spawnpool::TraceArgs;

class TraceLayer : public StackedLayer {
 public:
  /// `writer` is not owned and must outlive the layer; `args` may be empty.
  TraceLayer(Layer& inner, TraceWriter& writer, TraceArgs args)
      : StackedLayer(inner), writer_(writer), args_(std::move(args)) {}

  Result run(PreparedCommand& command) override {
    const RecordedLine line(command);
    Result result = inner_.run(command);
    if (args_ && result.started()) {
      writer_.add(result, line.text(), args_());
    } else {
      writer_.add(result, line.text());
    }
    return result;
  }

 private:
  TraceWriter& writer_;
  const TraceArgs args_;
};

}  // namespace spawnpool::detail
