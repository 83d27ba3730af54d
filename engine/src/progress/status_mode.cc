#include "engine/src/progress/status_mode.h"

#include <unistd.h>

#include <cctype>
#include <cstdlib>

namespace spawnpool::detail {
namespace {

std::string normalised(std::string_view setting) {
  const std::size_t begin = setting.find_first_not_of(" \t\n");
  if (begin == std::string_view::npos) return "";
  const std::size_t end = setting.find_last_not_of(" \t\n");
  std::string out(setting.substr(begin, end - begin + 1));
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

TerminalConventions TerminalConventions::from_environment() {
  TerminalConventions conventions;
  if (const char* term = std::getenv("TERM")) conventions.term = term;
  const char* force = std::getenv("CLICOLOR_FORCE");
  conventions.clicolor_force = force != nullptr && *force != '\0' && std::string_view(force) != "0";
  for (const char* name : {"LC_ALL", "LC_CTYPE", "LANG"}) {
    const char* value = std::getenv(name);
    if (value == nullptr || *value == '\0') continue;
    const std::string locale = normalised(value);
    conventions.utf8 = locale.find("utf-8") != std::string::npos ||
                       locale.find("utf8") != std::string::npos;
    break;
  }
  conventions.reflows = std::getenv("XTERM_VERSION") == nullptr;
  return conventions;
}

StatusPrinterOptions status_printer_options(StatusMode mode, int fd,
                                            const TerminalConventions& conventions) {
  StatusPrinterOptions options;
  options.fd = fd;
  options.mode = mode;
  options.unicode = conventions.utf8;
  options.terminal_reflows = conventions.reflows;
  return options;
}

bool valid_status_setting(std::string_view setting) {
  const std::string s = normalised(setting);
  return s == "auto" || s == "line" || s == "plain" || s == "off";
}

std::optional<StatusMode> status_mode(std::string_view setting, int fd,
                                      const TerminalConventions& conventions) {
  const std::string s = normalised(setting);
  if (s == "off") return std::nullopt;
  if (s == "plain") return StatusMode::kPlain;
  const bool terminal = isatty(fd) == 1;
  const bool dumb = conventions.term.empty() || conventions.term == "dumb";
  if ((terminal && !dumb) || conventions.clicolor_force) return StatusMode::kLine;
  // Asked for, or a dumb terminal: progress without escape codes.
  if (s == "line" || terminal) return StatusMode::kPlain;
  return std::nullopt;  // auto, and not a terminal: as stock
}

}  // namespace spawnpool::detail
