#include "engine/src/command/compile_classifier.h"

#include <algorithm>

#include "engine/src/command/command_identity.h"
#include "engine/src/command/shell_invocation.h"

namespace spawnpool::detail {
namespace {

constexpr std::string_view kDefaultCompilers[] = {"cc", "gcc", "g++", "c++", "clang", "clang++"};

std::string_view trimmed(std::string_view s) {
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  return s;
}

// The name without a version suffix ("-12", "-14.0.1"), or the name itself.
std::string_view without_version(std::string_view name) {
  const std::size_t dash = name.rfind('-');
  if (dash == std::string_view::npos || dash + 1 >= name.size()) return name;
  const std::string_view version = name.substr(dash + 1);
  if (version[0] < '0' || version[0] > '9') return name;
  for (char c : version)
    if (c != '.' && (c < '0' || c > '9')) return name;
  return name.substr(0, dash);
}

}  // namespace

CompileClassifier::CompileClassifier(const std::vector<std::string>& extra_compilers)
    : names_(std::begin(kDefaultCompilers), std::end(kDefaultCompilers)) {
  for (const std::string& extra : extra_compilers) {
    const std::string_view name = trimmed(extra);
    if (!name.empty() && !is_name(name)) names_.emplace_back(name);
  }
}

const CompileClassifier& CompileClassifier::default_compilers() {
  static const CompileClassifier classifier;
  return classifier;
}

bool CompileClassifier::is_name(std::string_view name) const {
  return std::find(names_.begin(), names_.end(), name) != names_.end();
}

bool CompileClassifier::is_compiler(std::string_view program) const {
  const std::size_t slash = program.rfind('/');
  if (slash != std::string_view::npos) {
    std::string_view directory = program.substr(0, slash);
    while (!directory.empty() && directory.back() == '/') directory.remove_suffix(1);
    if (is_compiler_launcher(file_name(directory))) return false;  // a masquerade link
  }
  const std::string_view name = file_name(program);
  for (const std::string_view candidate : {name, without_version(name)}) {
    if (is_name(candidate)) return true;
    // A target prefix: x86_64-linux-gnu-gcc, arm-none-eabi-g++-12.
    for (std::size_t dash = candidate.find('-'); dash != std::string_view::npos && dash > 0;
         dash = candidate.find('-', dash + 1))
      if (is_name(candidate.substr(dash + 1))) return true;
  }
  return false;
}

std::size_t CompileClassifier::compile_offset(std::string_view line,
                                              const std::vector<ShellToken>& tokens) const {
  // The first simple command's words: the compiler's own words end where it does (at
  // && ; | ...); a redirection's target is not one of them.
  std::size_t i = 0;
  const auto ends_command = [&](std::size_t at) {
    return at >= tokens.size() || tokens[at].kind == ShellToken::kSeparator ||
           tokens[at].kind == ShellToken::kComment;
  };
  while (!ends_command(i) && tokens[i].kind == ShellToken::kWord &&
         is_assignment(line.substr(tokens[i].begin, tokens[i].end - tokens[i].begin)))
    ++i;
  if (ends_command(i) || tokens[i].kind != ShellToken::kWord) return std::string_view::npos;
  const ShellToken& program = tokens[i];
  if (!program.exact || !is_compiler(program.text)) return std::string_view::npos;
  for (++i; !ends_command(i); ++i) {
    const ShellToken& token = tokens[i];
    if (token.kind != ShellToken::kWord) {
      if (i + 1 < tokens.size() && tokens[i + 1].kind == ShellToken::kWord) ++i;  // its target
    } else if (token.exact && token.text == "-c") {
      return program.begin;
    }
  }
  return std::string_view::npos;
}

bool CompileClassifier::is_compile(const std::vector<std::string>& argv) const {
  return !argv.empty() && is_compiler(argv[0]) &&
         std::find(argv.begin() + 1, argv.end(), "-c") != argv.end();
}

}  // namespace spawnpool::detail
