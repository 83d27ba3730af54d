// One layer of the command stack (Ninja's CommandRunner seam): every feature around a
// command (launcher, direct exec, output sync, trace and statistics) is a Layer on an
// inner Layer, and the bottom one runs the command (the pool, a plain in-process runner,
// the tests' fake). The Session (engine/src/stack/session.*) builds the stack once per
// build from the build's options; a layer nobody asked for is not in it. Thread-safe:
// run() is called from many driver threads at once; a layer keeps what it shares under
// its own lock and never holds it across the inner run().
#pragma once

#include "engine/src/command/prepared_command.h"
#include "spawnpool/result.h"

namespace spawnpool::detail {

class Layer {
 public:
  virtual ~Layer() = default;
  /// Runs `command` (already prepared: prepared_command.h) and returns its result. A
  /// command that fails, or never starts, is a Result, never an exception. A layer may
  /// change `command.command` on the way down (what runs), never the rest.
  virtual Result run(PreparedCommand& command) = 0;
};

/// A layer on an inner one (the Session owns both and keeps the inner alive longer).
class StackedLayer : public Layer {
 public:
  explicit StackedLayer(Layer& inner) : inner_(inner) {}

 protected:
  Layer& inner_;
};

}  // namespace spawnpool::detail
