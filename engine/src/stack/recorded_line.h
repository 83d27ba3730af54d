// The line the recording layers (the trace, the statistics) record for a command: what
// ran, as they sit below the launcher. Without a launcher that is the caller's line
// (PreparedCommand::line); a launched command's is the line with the launcher put in.
// A plain function: no threading concerns.
#pragma once

#include <string>

#include "engine/src/command/prepared_command.h"

namespace spawnpool::detail {

/// Call it before the inner run() (a layer below may change `command.command` on the way
/// down). A copy only for a launched command; the caller's line is `line` itself.
class RecordedLine {
 public:
  explicit RecordedLine(const PreparedCommand& command) : command_(command) {
    if (!command.launched) return;
    const std::vector<std::string>& argv = command.command.argv;
    if (command.shell_line && argv.size() > 2) {
      launched_ = argv[2];  // where launcher_layer.cc put the launched line
      return;
    }
    for (std::size_t i = 0; i < argv.size(); ++i) {
      if (i > 0) launched_ += ' ';
      launched_ += argv[i];
    }
  }
  const std::string& text() const { return command_.launched ? launched_ : command_.line; }

 private:
  const PreparedCommand& command_;
  std::string launched_;
};

}  // namespace spawnpool::detail
