#include "engine/src/command/shell_invocation.h"

namespace spawnpool::detail {
namespace {

// `-c`, or a cluster of single-letter options that holds c (`-ec`, `-xc`).
bool is_command_flag(std::string_view arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg[1] == '-') return false;
  for (std::size_t i = 1; i < arg.size(); ++i)
    if (arg[i] < 'a' || arg[i] > 'z') return false;
  return arg.find('c') != std::string_view::npos;
}

// sh or dash as the system has it: bare (found on PATH) or in /bin or /usr/bin. Any other
// path may hold any shell.
bool is_system_dash(std::string_view shell) {
  for (std::string_view dir : {"", "/bin/", "/usr/bin/"}) {
    if (shell.substr(0, dir.size()) != dir) continue;
    const std::string_view name = shell.substr(dir.size());
    if (name == "sh" || name == "dash") return true;
  }
  return false;
}

}  // namespace

std::string_view file_name(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_known_shell(std::string_view name) {
  return name == "sh" || name == "dash" || name == "bash" || name == "ksh" || name == "zsh";
}

std::optional<ShellInvocation> shell_invocation(const std::vector<std::string>& argv,
                                                std::size_t first) {
  if (first + 2 >= argv.size() || !is_known_shell(file_name(argv[first])) ||
      !is_command_flag(argv[first + 1]))
    return std::nullopt;
  const bool as_dash =
      argv.size() == first + 3 && argv[first + 1] == "-c" && is_system_dash(argv[first]);
  return ShellInvocation{first + 2, as_dash};
}

}  // namespace spawnpool::detail
