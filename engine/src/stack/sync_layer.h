// Synchronized output (make's -O, `--output=sync`; the status line forces it too): a
// command its caller lets print (passthrough) runs captured, and what it wrote is printed
// as one block through the console (console.h) when it ends, so that the output of
// commands running at once is never interleaved, and the status line's printer stays in
// charge of the terminal while it draws. When fds 1 and 2 are the same open file (a
// terminal, `> log 2>&1`: console::streams_merged(), looked at when the layer is made)
// the command is captured merged (one pipe: the bytes keep the order it wrote them) and
// the block goes to fd 1; otherwise its stdout block goes to fd 1, then its stderr block
// to fd 2. A command whose caller captures passes untouched (its bytes are the caller's).
//
// The block is printed from the Result's own buffers (no copy); the bytes stay in the
// Result, and `command.command.output` stays the mode the command ran in, so that a layer
// above (the trace: a failed command's output) reads them in that form. A command that
// failed or never started is its Result as any other (its captured bytes, if any, printed).
//
// Colour: a command writing into a pipe sees no terminal, so a tool that asks isatty()
// turns colour off; nothing tty-like is faked, and escape codes a command writes anyway
// (-fdiagnostics-color=always) are passed through byte for byte.
//
// Stacked by the Session below the launcher and the recording layers and above direct
// exec (session.h: the block holds what direct exec adds, sh's "Segmentation fault").
// Thread-safe: no state but the capture mode, fixed when it is made; the console orders
// the blocks.
#pragma once

#include "engine/src/stack/layer.h"
#include "spawnpool/command.h"

namespace spawnpool::detail {

class SyncLayer : public StackedLayer {
 public:
  /// Looks at fds 1 and 2 now (console::streams_merged()).
  explicit SyncLayer(Layer& inner);
  /// `capture_mode`: kCaptureMerged or kCapture, whatever fds 1 and 2 are (tests).
  SyncLayer(Layer& inner, OutputMode capture_mode)
      : StackedLayer(inner), capture_mode_(capture_mode) {}

  Result run(PreparedCommand& command) override;

  OutputMode capture_mode() const { return capture_mode_; }

 private:
  const OutputMode capture_mode_;
};

}  // namespace spawnpool::detail
