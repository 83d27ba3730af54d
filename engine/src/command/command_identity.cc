#include "engine/src/command/command_identity.h"

#include <string_view>

#include "engine/src/command/shell_invocation.h"

namespace spawnpool::detail {
namespace {

using Words = std::vector<std::string_view>;

// One simple command of a shell line: its words, and where its stdout is redirected.
struct SimpleCommand {
  Words words;
  Words stdout_targets;
};

std::vector<SimpleCommand> split_commands(const std::vector<ShellToken>& tokens) {
  std::vector<SimpleCommand> commands(1);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const ShellToken& token = tokens[i];
    switch (token.kind) {
      case ShellToken::kComment: continue;
      case ShellToken::kSeparator:
        if (!commands.back().words.empty()) commands.emplace_back();
        continue;
      case ShellToken::kWord: commands.back().words.push_back(token.text); continue;
      case ShellToken::kStdoutRedirect:
      case ShellToken::kOtherRedirect: break;
    }
    // A redirection takes the word after it as its target (not an argument).
    if (i + 1 < tokens.size() && tokens[i + 1].kind == ShellToken::kWord) {
      if (token.kind == ShellToken::kStdoutRedirect)
        commands.back().stdout_targets.push_back(tokens[i + 1].text);
      ++i;
    }
  }
  if (commands.back().words.empty() && commands.size() > 1) commands.pop_back();
  return commands;
}

bool is_wrapper(std::string_view name) {
  return name == "env" || name == "exec" || name == "nice" || name == "time" ||
         name == "command";
}

// Index in `words` of the program doing the work, past assignments, wrappers that run
// another program (`env X=1 nice -n 5 gcc ...` names gcc) and a compiler launcher that
// runs a compiler (`ccache gcc ...` names gcc); words.size() if none.
std::size_t program_index(const Words& words) {
  std::size_t i = 0;
  while (i < words.size()) {
    const std::string_view name = file_name(words[i]);
    if (is_assignment(words[i])) {
      ++i;
    } else if (is_wrapper(name)) {
      for (++i; i < words.size() && (words[i].substr(0, 1) == "-" || is_assignment(words[i]));
           ++i) {
        if (name == "nice" && words[i] == "-n") ++i;  // its value
      }
    } else if (is_compiler_launcher(name) && i + 1 < words.size() &&
               words[i + 1].substr(0, 1) != "-") {
      ++i;  // the compiler it runs (a launcher's own option: the launcher is the program)
    } else {
      break;
    }
  }
  return i;
}

// Commands that prepare for the real one in a line such as `cd dir && cc -o x.o x.c`.
bool sets_the_stage(std::string_view program) {
  static constexpr std::string_view kStage[] = {
      "cd", "pushd", "popd", "mkdir", "rm", "echo", "printf", "true",
      ":",  "set",   "export", "umask", "test", "[", "trap", "ulimit"};
  for (std::string_view stage : kStage)
    if (program == stage) return true;
  return false;
}

// /dev/null and the like: not a file the command makes, and shared by many commands.
bool names_a_file(std::string_view path) {
  return !path.empty() && path.substr(0, 5) != "/dev/";
}

// The operand of the first output option among `words` (from `first`); empty if none.
std::string_view output_option(const Words& words, std::size_t first) {
  for (std::size_t i = first; i < words.size(); ++i) {
    const std::string_view w = words[i];
    std::string_view operand;
    if ((w == "-o" || w == "--output") && i + 1 < words.size()) operand = words[++i];
    else if (w.size() > 2 && w[0] == '-' && w[1] == 'o') operand = w.substr(2);
    else if (w.substr(0, 9) == "--output=") operand = w.substr(9);
    if (names_a_file(operand)) return operand;
  }
  return {};
}

CommandIdentity identify_words(const Words& words) {
  const std::size_t p = program_index(words);
  if (p >= words.size()) return {};
  return {std::string(words[p]), std::string(output_option(words, p + 1))};
}

}  // namespace

bool is_compiler_launcher(std::string_view name) {
  return name == "ccache" || name == "distcc" || name == "icecc" || name == "sccache";
}

CommandIdentity identify_command(const std::vector<std::string>& argv) {
  const Words words(argv.begin(), argv.end());
  const std::size_t p = program_index(words);
  if (p >= argv.size()) return {};
  if (const auto shell = shell_invocation(argv, p))
    return identify_line(shell_tokens(argv[shell->line_index]));
  return identify_words(words);
}

CommandIdentity identify_line(const std::vector<ShellToken>& tokens) {
  const std::vector<SimpleCommand> commands = split_commands(tokens);
  const SimpleCommand* chosen = nullptr;
  for (const SimpleCommand& command : commands) {
    const std::size_t p = program_index(command.words);
    if (p == command.words.size()) continue;
    if (!chosen) chosen = &command;
    if (!sets_the_stage(file_name(command.words[p]))) {
      chosen = &command;
      break;
    }
  }
  if (!chosen) return {};
  CommandIdentity identity = identify_words(chosen->words);
  for (std::size_t c = 0; identity.output.empty() && c < commands.size(); ++c)
    identity.output = output_option(commands[c].words, program_index(commands[c].words) + 1);
  for (std::size_t c = 0; identity.output.empty() && c < commands.size(); ++c)
    for (std::string_view target : commands[c].stdout_targets)
      if (identity.output.empty() && names_a_file(target)) identity.output = target;
  return identity;
}

}  // namespace spawnpool::detail
