#include "engine/src/history/history_store_key.h"

#include <cstring>
#include <string_view>

namespace spawnpool::detail {
namespace {

// Each key kind hashes with its own seed, so an exact key can never equal a fallback key
// by construction of the bytes alone.
constexpr std::uint64_t kExactSeed = 0x5350'4558'4143'5431ULL;     // "SPEXACT1"
constexpr std::uint64_t kFallbackSeed = 0x5350'4641'4c4c'4231ULL;  // "SPFALLB1"
constexpr std::uint64_t kProgramSeed = 0x5350'5052'4f47'5231ULL;   // "SPPROGR1"

// What a shell line is cut into: words and the operators this heuristic cares about.
struct ShellToken {
  enum Kind { kWord, kSeparator, kStdoutRedirect, kOtherRedirect };
  Kind kind;
  std::string text;
};

// One simple command of a shell line: its words, and where its stdout is redirected.
struct SimpleCommand {
  std::vector<std::string> words;
  std::vector<std::string> stdout_targets;
};

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// Splits `line` as sh would into words (quotes and backslashes removed) and the
// separators and redirections between them. Expansions ($x, $(...), globs) are kept as
// written: the key only needs to be stable, not what the shell would run.
class ShellTokenizer {
 public:
  explicit ShellTokenizer(std::string_view line) : line_(line) {}

  std::vector<ShellToken> run() {
    while (pos_ < line_.size()) step();
    end_word();
    return std::move(tokens_);
  }

 private:
  void step() {
    const char c = line_[pos_];
    if (c == ' ' || c == '\t') {
      end_word();
      ++pos_;
    } else if (c == '#' && !in_word_) {  // a comment runs to the end of the line
      while (pos_ < line_.size() && line_[pos_] != '\n') ++pos_;
    } else if (c == '\'') {
      in_word_ = quoted_ = true;
      const std::size_t close = line_.find('\'', pos_ + 1);
      const std::size_t stop = close == std::string_view::npos ? line_.size() : close;
      word_.append(line_.substr(pos_ + 1, stop - pos_ - 1));
      pos_ = stop + 1;
    } else if (c == '"') {
      in_word_ = quoted_ = true;
      double_quoted();
    } else if (c == '\\') {
      in_word_ = true;
      if (pos_ + 1 < line_.size() && line_[pos_ + 1] != '\n') word_ += line_[pos_ + 1];
      pos_ += 2;
    } else if (c == '>' || c == '<' || (c == '&' && peek(1) == '>')) {
      redirect();
    } else if (c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')') {
      end_word();
      tokens_.push_back({ShellToken::kSeparator, std::string(1, c)});
      ++pos_;
      if ((c == '&' || c == '|') && (peek(0) == c || (c == '|' && peek(0) == '&'))) ++pos_;
    } else {
      in_word_ = true;
      word_ += c;
      ++pos_;
    }
  }

  void double_quoted() {
    for (++pos_; pos_ < line_.size() && line_[pos_] != '"'; ++pos_) {
      const char next = peek(1);
      if (line_[pos_] == '\\' && (next == '"' || next == '\\' || next == '$' || next == '`')) {
        word_ += next;
        ++pos_;
      } else {
        word_ += line_[pos_];
      }
    }
    ++pos_;  // the closing quote
  }

  // At '>', '<' or "&>": an unquoted all-digit word just before names the fd.
  void redirect() {
    bool stdout_redirect = line_[pos_] != '<';
    if (in_word_ && !quoted_ && all_digits(word_)) {
      stdout_redirect = stdout_redirect && word_ == "1";
      word_.clear();
      in_word_ = false;
    }
    end_word();
    const char first = line_[pos_++];
    if (first == '&') ++pos_;  // "&>": stdout and stderr
    // ">>", ">|", "<<", "<>" ...: one operator. ">&N" duplicates an fd: no file.
    while (pos_ < line_.size() && (line_[pos_] == '>' || line_[pos_] == '<' ||
                                   line_[pos_] == '|' || line_[pos_] == '&')) {
      if (line_[pos_] == '&') stdout_redirect = false;
      ++pos_;
    }
    tokens_.push_back({stdout_redirect ? ShellToken::kStdoutRedirect : ShellToken::kOtherRedirect, {}});
  }

  void end_word() {
    if (in_word_) tokens_.push_back({ShellToken::kWord, std::move(word_)});
    word_.clear();
    in_word_ = quoted_ = false;
  }

  char peek(std::size_t ahead) const {
    return pos_ + ahead < line_.size() ? line_[pos_ + ahead] : '\0';
  }

  std::string_view line_;
  std::size_t pos_ = 0;
  std::string word_;
  bool in_word_ = false;  // word_ holds a word being read (possibly empty: "")
  bool quoted_ = false;   // part of it was quoted (so "2" before '>' is a word)
  std::vector<ShellToken> tokens_;
};

std::vector<SimpleCommand> split_commands(std::vector<ShellToken> tokens) {
  std::vector<SimpleCommand> commands(1);
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    ShellToken& token = tokens[i];
    if (token.kind == ShellToken::kSeparator) {
      if (!commands.back().words.empty()) commands.emplace_back();
      continue;
    }
    if (token.kind == ShellToken::kWord) {
      commands.back().words.push_back(std::move(token.text));
      continue;
    }
    // A redirection takes the word after it as its target (not an argument).
    if (i + 1 < tokens.size() && tokens[i + 1].kind == ShellToken::kWord) {
      if (token.kind == ShellToken::kStdoutRedirect)
        commands.back().stdout_targets.push_back(std::move(tokens[i + 1].text));
      ++i;
    }
  }
  if (commands.back().words.empty() && commands.size() > 1) commands.pop_back();
  return commands;
}

std::string_view file_name(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool is_assignment(const std::string& word) {
  const std::size_t eq = word.find('=');
  if (eq == 0 || eq == std::string::npos) return false;
  for (std::size_t i = 0; i < eq; ++i) {
    const char c = word[i];
    const bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// Index in `words` of the program doing the work, past assignments and wrappers that
// run another program (`env X=1 nice -n 5 gcc ...` names gcc); words.size() if none.
std::size_t program_index(const std::vector<std::string>& words) {
  std::size_t i = 0;
  while (i < words.size()) {
    const std::string_view name = file_name(words[i]);
    if (is_assignment(words[i])) {
      ++i;
    } else if (name == "env" || name == "exec" || name == "nice" || name == "time" ||
               name == "command") {
      for (++i; i < words.size() && (words[i].rfind('-', 0) == 0 || is_assignment(words[i]));
           ++i) {
        if (name == "nice" && words[i] == "-n") ++i;  // its value
      }
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
bool names_a_file(const std::string& path) { return !path.empty() && path.rfind("/dev/", 0) != 0; }

// The operand of the first output option among `words` (from `first`); empty if none.
std::string output_option(const std::vector<std::string>& words, std::size_t first) {
  for (std::size_t i = first; i < words.size(); ++i) {
    const std::string& w = words[i];
    std::string operand;
    if ((w == "-o" || w == "--output") && i + 1 < words.size()) operand = words[++i];
    else if (w.size() > 2 && w[0] == '-' && w[1] == 'o') operand = w.substr(2);
    else if (w.rfind("--output=", 0) == 0) operand = w.substr(9);
    if (names_a_file(operand)) return operand;
  }
  return {};
}

bool is_shell(std::string_view name) {
  return name == "sh" || name == "bash" || name == "dash" || name == "zsh" || name == "ksh";
}

// `-c`, or a cluster of single-letter options that holds c (`-ec`, `-xc`).
bool is_command_flag(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg[1] == '-') return false;
  for (std::size_t i = 1; i < arg.size(); ++i)
    if (arg[i] < 'a' || arg[i] > 'z') return false;
  return arg.find('c') != std::string::npos;
}

CommandIdentity identify_shell_line(const std::string& line) {
  const std::vector<SimpleCommand> commands = split_commands(ShellTokenizer(line).run());
  const SimpleCommand* chosen = nullptr;
  std::size_t chosen_program = 0;
  for (const SimpleCommand& command : commands) {
    const std::size_t p = program_index(command.words);
    if (p == command.words.size()) continue;
    if (!chosen) {
      chosen = &command;
      chosen_program = p;
    }
    if (!sets_the_stage(file_name(command.words[p]))) {
      chosen = &command;
      chosen_program = p;
      break;
    }
  }
  CommandIdentity identity;
  if (!chosen) return identity;
  identity.program = std::string(file_name(chosen->words[chosen_program]));
  identity.output = output_option(chosen->words, chosen_program + 1);
  for (std::size_t c = 0; identity.output.empty() && c < commands.size(); ++c)
    identity.output = output_option(commands[c].words, program_index(commands[c].words) + 1);
  for (std::size_t c = 0; identity.output.empty() && c < commands.size(); ++c)
    for (const std::string& target : commands[c].stdout_targets)
      if (identity.output.empty() && names_a_file(target)) identity.output = target;
  return identity;
}

void append_field(std::string& buffer, std::string_view field) {
  buffer.append(field);
  buffer.push_back('\0');  // argv strings hold no NUL, so the fields cannot run together
}

// Hashes never give 0, which means "no key" in CommandKey.
std::uint64_t nonzero(std::uint64_t hash) { return hash == 0 ? 1 : hash; }

}  // namespace

std::uint64_t hash_bytes(const void* data, std::size_t size, std::uint64_t seed) {
  constexpr std::uint64_t m = 0xc6a4a7935bd1e995ULL;
  constexpr int r = 47;
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed ^ (size * m);
  const unsigned char* const blocks_end = p + (size / 8) * 8;
  for (; p != blocks_end; p += 8) {
    std::uint64_t k;
    std::memcpy(&k, p, 8);
    k *= m;
    k ^= k >> r;
    k *= m;
    h ^= k;
    h *= m;
  }
  const std::size_t tail = size & 7;
  if (tail) {
    for (std::size_t i = tail; i-- > 0;) h ^= std::uint64_t(p[i]) << (8 * i);
    h *= m;
  }
  h ^= h >> r;
  h *= m;
  h ^= h >> r;
  return h;
}

CommandIdentity identify_command(const std::vector<std::string>& argv) {
  const std::size_t p = program_index(argv);
  if (p >= argv.size()) return {};
  const std::string_view name = file_name(argv[p]);
  if (is_shell(name) && p + 2 < argv.size() && is_command_flag(argv[p + 1]))
    return identify_shell_line(argv[p + 2]);
  return {std::string(name), output_option(argv, p + 1)};
}

CommandKey make_command_key(const std::vector<std::string>& argv, const std::string& cwd) {
  CommandKey key;
  std::string buffer;
  std::size_t total = cwd.size() + 1;
  for (const std::string& arg : argv) total += arg.size() + 1;
  buffer.reserve(total);
  append_field(buffer, cwd);
  for (const std::string& arg : argv) append_field(buffer, arg);
  key.exact = nonzero(hash_bytes(buffer.data(), buffer.size(), kExactSeed));

  const CommandIdentity identity = identify_command(argv);
  key.program = nonzero(hash_bytes(identity.program.data(), identity.program.size(), kProgramSeed));
  if (!identity.output.empty()) {
    buffer.clear();
    append_field(buffer, identity.program);
    // A relative output names a different file in another directory.
    append_field(buffer, identity.output[0] == '/' ? std::string_view() : cwd);
    append_field(buffer, identity.output);
    key.fallback = nonzero(hash_bytes(buffer.data(), buffer.size(), kFallbackSeed));
  }
  return key;
}

}  // namespace spawnpool::detail
