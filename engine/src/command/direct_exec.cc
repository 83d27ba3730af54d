#include "engine/src/command/direct_exec.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <array>
#include <climits>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "engine/src/command/console.h"
#include "engine/src/command/prepare_command.h"

namespace spawnpool::detail {
namespace {

// Signals that normally hit the whole process group, the shell included: passed as -N.
bool is_group_signal(int n) { return n == SIGINT || n == SIGTERM || n == SIGHUP || n == SIGQUIT; }

struct ShStatusTable {
  std::array<std::string, NSIG> messages;  // by signal number; empty: sh prints nothing
  ShStatusTable() {
    for (int n = 1; n < NSIG; ++n) {
      if (is_group_signal(n) || n == SIGPIPE) continue;  // dash is silent on SIGPIPE
      // Made once, before any thread asks (a function-local static). glibc says
      // "Unknown signal N" for the numbers it keeps (32, 33): dash has nothing to print.
      const char* text = strsignal(n);
      if (text && strncmp(text, "Unknown signal", 14) != 0)
        messages[static_cast<std::size_t>(n)] = std::string(text) + "\n";
    }
  }
};

const ShStatusTable& sh_status_table() {
  static const ShStatusTable table;
  return table;
}

// dash's getcwd(): the directory without symlinks. A build runs in a handful of
// directories: each is resolved once (the cache is emptied when it grows past 64).
std::string physical_directory(const std::string& cwd) {
  static std::mutex lock;
  static std::unordered_map<std::string, std::string> known;
  {
    const std::lock_guard<std::mutex> hold(lock);
    const auto found = known.find(cwd);
    if (found != known.end()) return found->second;
  }
  char buffer[PATH_MAX];
  std::string physical = realpath(cwd.c_str(), buffer) ? buffer : cwd;
  const std::lock_guard<std::mutex> hold(lock);
  if (known.size() >= 64) known.clear();
  known.emplace(cwd, physical);
  return physical;
}

bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_ino == sb.st_ino &&
         sa.st_dev == sb.st_dev;
}

// A program killed by a signal: the status and message sh would have given, the message
// where the command's stderr goes.
void as_sh_would(Result& result, OutputMode output) {
  const ShStatus sh = sh_status(result.returncode);
  result.returncode = sh.returncode;
  if (sh.message.empty()) return;
  switch (output) {
    case OutputMode::kPassthrough: console::message(sh.message); break;
    case OutputMode::kCaptureMerged: result.stdout_data.append(sh.message); break;
    case OutputMode::kCapture: result.stderr_data.append(sh.message); break;
  }
}

std::vector<std::string> direct_argv(const PreparedCommand& command) {
  std::vector<std::string> argv;
  argv.reserve(command.launcher_words.size() + command.simple_words.size());
  argv.insert(argv.end(), command.launcher_words.begin(), command.launcher_words.end());
  argv.insert(argv.end(), command.simple_words.begin(), command.simple_words.end());
  return argv;
}

}  // namespace

ShStatus sh_status(int returncode) {
  if (returncode >= 0 || returncode <= -NSIG || is_group_signal(-returncode))
    return {returncode, {}};
  return {128 - returncode, sh_status_table().messages[static_cast<std::size_t>(-returncode)]};
}

PwdChange export_pwd(std::vector<std::string>& env, const std::string& cwd) {
  PwdChange change;
  change.index = environment_index(env, "PWD");
  if (change.index < env.size()) {
    const std::string pwd = env[change.index].substr(4);
    if (pwd == cwd) return change;
    if (!pwd.empty() && pwd[0] == '/' && same_file(pwd, cwd))
      return change;  // a logical path to the same directory: dash keeps it
    change.kind = PwdChange::kReplaced;
    change.replaced = std::move(env[change.index]);
    env[change.index] = "PWD=" + physical_directory(cwd);
  } else {
    change.kind = PwdChange::kAdded;
    env.push_back("PWD=" + physical_directory(cwd));
  }
  return change;
}

void restore_pwd(std::vector<std::string>& env, PwdChange& change) {
  if (change.kind == PwdChange::kAdded) env.pop_back();
  else if (change.kind == PwdChange::kReplaced) env[change.index] = std::move(change.replaced);
  change.kind = PwdChange::kNone;
}

Result DirectExec::run(PreparedCommand& command) {
  Command& what = command.command;
  if (command.simple_words.empty() || what.cwd.empty() || !what.env) return inner_.run(command);
  std::vector<std::string>& env = *what.env;
  const std::string& program =
      command.launcher_words.empty() ? command.simple_words[0] : command.launcher_words[0];
  // Without PATH dash searches its own default, which is not execvp's: sh does it.
  if (program.find('/') == std::string::npos && environment_index(env, "PATH") == env.size())
    return inner_.run(command);
  const OutputMode output = what.output;
  PwdChange pwd = export_pwd(env, what.cwd);
  std::vector<std::string> shell_argv = std::exchange(what.argv, direct_argv(command));
  Result result = inner_.run(command);
  what.argv = std::move(shell_argv);
  restore_pwd(env, pwd);
  // Nothing ran: sh runs the line and says why (126/127) in its own words.
  if (result.failure == FailureStage::kExec) return inner_.run(command);
  if (result.started() && result.returncode < 0) as_sh_would(result, output);
  return result;
}

}  // namespace spawnpool::detail
