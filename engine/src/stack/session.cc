#include "engine/src/stack/session.h"

#include <unistd.h>

#include <stdexcept>
#include <utility>

#include "engine/src/command/direct_exec.h"
#include "engine/src/command/prepare_command.h"
#include "engine/src/stack/pool_layer.h"
#include "engine/src/stack/sync_layer.h"

namespace spawnpool::detail {
namespace {

bool blank(const std::string& text) {
  return text.find_first_not_of(" \t\n") == std::string::npos;
}

// SessionOptions::warn, or its default: one line on stderr, in one write.
TraceRecording::Warn warning_sink(const SessionOptions& options) {
  if (options.warn) return options.warn;
  return [prefix = options.message_prefix](const std::string& sentence) {
    const std::string line = prefix + ": " + sentence + "\n";
    [[maybe_unused]] const ssize_t n = ::write(2, line.data(), line.size());
  };
}

}  // namespace

Session::Session(Layer& base, SessionOptions options)
    : Session(nullptr, &base, std::move(options)) {}

Session::Session(Pool& pool, SessionOptions options)
    : Session(std::make_unique<PoolLayer>(pool), nullptr, std::move(options)) {
  if (statistics_) statistics_->note_slots(static_cast<int>(pool.slots()));
}

// `base` is the caller's, or null for `owned_base`.
Session::Session(std::unique_ptr<Layer> owned_base, Layer* base, SessionOptions options)
    : classifier_(options.compilers),
      owned_base_(std::move(owned_base)),
      seam_(base ? *base : *owned_base_),
      recording_(options, warning_sink(options)) {
  Layer* below = &seam_;
  if (options.direct_exec) {
    direct_exec_ = std::make_unique<DirectExec>(*below);
    below = direct_exec_.get();
  }
  if (options.output_sync) {
    sync_ = std::make_unique<SyncLayer>(*below);
    below = sync_.get();
  }
  statistics_ = std::move(options.statistics);
  if (!statistics_ && options.stats_slots)
    statistics_ = std::make_shared<BuildStatistics>(*options.stats_slots);
  if (statistics_) {
    stats_layer_ = std::make_unique<StatsLayer>(*below, *statistics_);
    below = stats_layer_.get();
  }
  if (const std::shared_ptr<TraceWriter>& trace = recording_.trace()) {
    trace_layer_ = std::make_unique<TraceLayer>(*below, *trace, std::move(options.trace_args));
    below = trace_layer_.get();
  }
  checks_ = below;
  if (!blank(options.launcher)) {
    const std::vector<std::string> driver_environment =
        options.driver_environment ? std::move(*options.driver_environment)
                                   : current_environment();
    launcher_ = std::make_unique<LauncherLayer>(
        *below, Launcher(options.launcher, driver_environment), options.message_prefix);
    below = launcher_.get();
  }
  top_ = below;
}

Session::~Session() = default;

PreparedCommand Session::prepare(Command command) const {
  return prepare_command(std::move(command), classifier_);
}

Result Session::run(Command command, bool check) {
  PreparedCommand prepared = prepare(std::move(command));
  return (check ? *checks_ : *top_).run(prepared);
}

void Session::rebase(Layer& base) {
  seam_.base_ = &base;
  owned_base_.reset();
}

void Session::rebase(Pool& pool) {
  std::unique_ptr<Layer> layer = std::make_unique<PoolLayer>(pool);
  seam_.base_ = layer.get();
  owned_base_ = std::move(layer);
  if (statistics_) statistics_->note_slots(static_cast<int>(pool.slots()));
}

}  // namespace spawnpool::detail
