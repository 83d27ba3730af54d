#include "engine/src/command/launcher_layer.h"

#include "engine/src/command/console.h"

namespace spawnpool::detail {
namespace {

constexpr std::size_t kMaxShown = 200;  // characters of a command line in a message

// The line cut to kMaxShown characters (UTF-8 code points, as the Python messages counted
// them), with "..." when it was longer.
std::string shown(std::string_view line) {
  std::size_t characters = 0;
  std::size_t cut = line.size();  // where character kMaxShown - 3 starts
  for (std::size_t i = 0; i < line.size(); ++i) {
    if ((static_cast<unsigned char>(line[i]) & 0xc0) == 0x80) continue;  // a continuation
    if (characters == kMaxShown - 3) cut = i;
    if (++characters > kMaxShown) return std::string(line.substr(0, cut)) + "...";
  }
  return std::string(line);
}

}  // namespace

LauncherLayer::LauncherLayer(Layer& inner, Launcher launcher, std::string message_prefix)
    : StackedLayer(inner),
      launcher_(std::move(launcher)),
      prefix_(std::move(message_prefix)),
      capture_mode_(console::streams_merged() ? OutputMode::kCaptureMerged
                                              : OutputMode::kCapture) {}

Result LauncherLayer::run(PreparedCommand& command) {
  if (command.compile) return launch(command);
  command.local = true;
  local_commands_.fetch_add(1, std::memory_order_relaxed);
  return inner_.run(command);
}

// What runs becomes `<launcher> <compile>`; the caller's line and words stay as they were.
void LauncherLayer::rewrite(PreparedCommand& command) const {
  std::vector<std::string>& argv = command.command.argv;
  const std::vector<std::string>& words = launcher_.words();
  if (command.shell_line && command.compiler_offset <= command.line.size()) {
    const std::string_view line = command.line;
    argv[2] = std::string(line.substr(0, command.compiler_offset)) + launcher_.prefix() + ' ' +
              std::string(line.substr(command.compiler_offset));
    if (!command.simple_words.empty()) command.launcher_words = words;
  } else {
    argv.insert(argv.begin(), words.begin(), words.end());
  }
  if (command.command.env) launcher_.add_environment(*command.command.env);
}

Result LauncherLayer::launch(PreparedCommand& command) {
  command.launched = true;
  command.local = false;
  rewrite(command);
  Command& what = command.command;
  const bool shown_here = launcher_.is_distcc() && what.output == OutputMode::kPassthrough;
  if (shown_here) what.output = capture_mode_;
  Result result = inner_.run(command);
  const bool ran_locally =
      launcher_.ran_locally(result.stderr_data) || launcher_.ran_locally(result.stdout_data);
  if (shown_here) {  // the caller let it print: it sees the block, not the bytes
    console::output_block(result.stdout_data, result.stderr_data);
    result.stdout_data.clear();
    result.stderr_data.clear();
    result.captured = false;
  }
  const std::string problem = result.started() ? launcher_.failure(result.returncode) : "";
  launched_.fetch_add(1, std::memory_order_relaxed);
  if (ran_locally) ran_locally_.fetch_add(1, std::memory_order_relaxed);
  if (!problem.empty()) {
    launcher_failed_.fetch_add(1, std::memory_order_relaxed);
    console::message(prefix_ + ": " + problem + " for: " + shown(command.line) + "\n");
  }
  return result;
}

LauncherCounts LauncherLayer::counts() const {
  LauncherCounts counts;
  counts.launched = launched_.load(std::memory_order_relaxed);
  counts.ran_locally = ran_locally_.load(std::memory_order_relaxed);
  counts.launcher_failed = launcher_failed_.load(std::memory_order_relaxed);
  counts.local_commands = local_commands_.load(std::memory_order_relaxed);
  return counts;
}

std::string LauncherLayer::summary() const {
  const LauncherCounts c = counts();
  const std::string& name = launcher_.name();
  std::string text = prefix_ + ": " + name + ": " + std::to_string(c.launched) +
                     " compiles through " + name;
  if (launcher_.is_distcc())
    text += ", " + std::to_string(c.ran_locally) + " of them compiled locally by distcc (fallback)";
  text += ", " + std::to_string(c.launcher_failed) + " failed in " + name + "; " +
          std::to_string(c.local_commands) + " other commands ran locally";
  return text;
}

}  // namespace spawnpool::detail
