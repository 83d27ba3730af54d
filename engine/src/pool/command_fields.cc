#include "engine/src/pool/command_fields.h"

#include <unistd.h>

#include <climits>

#include "worker_pool/protocol/protocol.h"

extern char** environ;

namespace spawnpool::detail {
namespace {

std::string current_directory() {
  char buffer[PATH_MAX];
  return getcwd(buffer, sizeof buffer) ? buffer : "";
}

}  // namespace

// The spawner's own cwd is the driver's at pool start: a relative cwd is resolved here,
// against the driver's cwd at submit time, as Popen would.
std::string working_directory(const std::string& cwd) {
  if (cwd.empty()) return current_directory();
  if (cwd[0] == '/') return cwd;
  const std::string here = current_directory();
  return here.empty() ? cwd : here + "/" + cwd;
}

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

std::uint32_t request_flags(OutputMode output) {
  switch (output) {
    case OutputMode::kPassthrough: return 0;
    case OutputMode::kCapture: return protocol::kCaptureOutput;
    case OutputMode::kCaptureMerged: return protocol::kCaptureOutput | protocol::kMergeStderr;
  }
  return 0;
}

}  // namespace spawnpool::detail
