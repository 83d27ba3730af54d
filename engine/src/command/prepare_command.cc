#include "engine/src/command/prepare_command.h"

#include <unistd.h>

#include <climits>

#include "engine/src/command/command_identity.h"
#include "engine/src/command/shell_invocation.h"
#include "engine/src/command/shell_words.h"

extern char** environ;

namespace spawnpool::detail {
namespace {

std::string current_directory() {
  char buffer[PATH_MAX];
  return getcwd(buffer, sizeof buffer) ? buffer : "";
}

std::string joined(const std::vector<std::string>& argv) {
  std::string line;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    if (i > 0) line += ' ';
    line += argv[i];
  }
  return line;
}

// A shell line is read once: its tokens give the compile's offset, then either its words
// (a simple dash line: direct exec runs them) or the identity of the line as a whole.
CommandIdentity read_shell_line(PreparedCommand& prepared, bool as_dash,
                                const CompileClassifier& classifier) {
  std::vector<ShellToken> tokens = shell_tokens(prepared.line);
  prepared.compiler_offset = classifier.compile_offset(prepared.line, tokens);
  prepared.compile = prepared.compiler_offset != std::string::npos;
  if (!as_dash || !is_simple_command(tokens)) return identify_line(tokens);
  prepared.simple_words = word_texts(std::move(tokens));
  return identify_command(prepared.simple_words);
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

std::size_t environment_index(const std::vector<std::string>& env, std::string_view name) {
  for (std::size_t i = 0; i < env.size(); ++i) {
    const std::string& entry = env[i];
    if (entry.size() > name.size() && entry[name.size()] == '=' &&
        entry.compare(0, name.size(), name) == 0)
      return i;
  }
  return env.size();
}

PreparedCommand prepare_command(Command command, const CompileClassifier& classifier) {
  PreparedCommand prepared;
  prepared.command = std::move(command);
  Command& c = prepared.command;
  c.cwd = working_directory(c.cwd);
  if (!c.env) c.env = current_environment();
  CommandIdentity identity;
  if (const auto shell = shell_invocation(c.argv)) {
    prepared.shell_line = true;
    prepared.line = c.argv[shell->line_index];
    identity = read_shell_line(prepared, shell->as_dash, classifier);
  } else {
    prepared.line = joined(c.argv);
    identity = identify_command(c.argv);
    prepared.compile = classifier.is_compile(c.argv);
  }
  prepared.program = std::move(identity.program);
  prepared.program_name = file_name(prepared.program);
  prepared.output = std::move(identity.output);
  return prepared;
}

}  // namespace spawnpool::detail

namespace spawnpool {

std::vector<std::string> current_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

}  // namespace spawnpool
