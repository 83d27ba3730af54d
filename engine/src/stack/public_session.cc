// spawnpool::Session (spawnpool/session.h), the public API, over the engine's Session
// (session.h): the same stack the bindings use, with nothing of its own but the text
// of the end of the build.
#include "spawnpool/session.h"

#include <utility>

#include "engine/src/stack/session.h"

namespace spawnpool {

Session::Session(Pool& pool, SessionOptions options)
    : message_prefix_(options.message_prefix) {
  session_ = std::make_unique<detail::Session>(pool, std::move(options));
}

Session::~Session() = default;

Result Session::run(Command command) { return session_->run(std::move(command)); }

Result Session::run_check(Command command) {
  return session_->run(std::move(command), /*check=*/true);
}

void Session::finish() {
  if (detail::TraceWriter* trace = session_->trace()) trace->close();
}

std::string Session::report() const {
  std::string text = session_->statistics_report(message_prefix_);
  const std::string summary = session_->launcher_summary();
  if (!summary.empty()) text += summary + "\n";
  return text;
}

}  // namespace spawnpool
