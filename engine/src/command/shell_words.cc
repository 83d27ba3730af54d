#include "engine/src/command/shell_words.h"

#include <algorithm>
#include <array>

namespace spawnpool::detail {
namespace {

// Characters that mean nothing to sh outside quotes. Left out on purpose: glob (* ? [ ]),
// brace expansion ({ }: bash as sh), tilde (~), comment (#), history/negation (!), and
// anything non-ASCII (multibyte locales where a trail byte looks like a backslash).
bool plain_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '_': case '-': case '.': case '/': case ',': case ':': case '+': case '=': case '@':
    case '%': case '^':
      return true;
    default:
      return false;
  }
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

// A first word the shell would not look up on PATH: reserved words and the builtins of
// dash and of bash (either may be /bin/sh). `echo`, `true`, `test`, `printf`, `kill`, `pwd`
// are builtins too: dash's echo expands backslash escapes where /bin/echo does not.
bool is_shell_word(std::string_view word) {
  static const std::vector<std::string_view> words = [] {
    std::vector<std::string_view> w = {
        "!", "{", "}", "[[", "]]", "case", "do", "done", "elif", "else", "esac", "fi", "for",
        "function", "if", "in", "select", "then", "time", "until", "while", "coproc", ".",
        ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "cd", "chdir",
        "command", "compgen", "complete", "compopt", "continue", "declare", "dirs",
        "disown", "echo", "enable", "eval", "exec", "exit", "export", "false", "fc", "fg",
        "getopts", "hash", "help", "history", "jobs", "kill", "let", "local", "logout",
        "mapfile", "popd", "printf", "pushd", "pwd", "read", "readarray", "readonly",
        "return", "set", "shift", "shopt", "source", "suspend", "test", "times", "trap",
        "true", "type", "typeset", "ulimit", "umask", "unalias", "unset", "wait"};
    std::sort(w.begin(), w.end());
    return w;
  }();
  return std::binary_search(words.begin(), words.end(), word);
}

// Reads a line left to right: a word is built up from its unquoted, quoted and escaped
// parts; an operator, a blank or the end ends it.
class ShellTokenizer {
 public:
  explicit ShellTokenizer(std::string_view line) : line_(line) {}

  std::vector<ShellToken> run() {
    tokens_.reserve(4 + line_.size() / 8);  // a build's words are rarely shorter
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
    } else if (c == '#' && !in_word_) {
      const std::size_t newline = line_.find('\n', pos_);
      const std::size_t stop = newline == std::string_view::npos ? line_.size() : newline;
      push(ShellToken::kComment, pos_, stop);
      pos_ = stop;
    } else if (c == '\'') {
      begin_word();
      quoted_ = true;
      const std::size_t close = line_.find('\'', pos_ + 1);
      const std::size_t stop = close == std::string_view::npos ? line_.size() : close;
      const std::string_view inside = line_.substr(pos_ + 1, stop - pos_ - 1);
      if (close == std::string_view::npos || inside.find('\n') != std::string_view::npos)
        exact_ = false;
      word_.append(inside);
      pos_ = stop + 1;
    } else if (c == '"') {
      begin_word();
      quoted_ = true;
      double_quoted();
    } else if (c == '\\') {
      escaped();
    } else if (c == '>' || c == '<' || (c == '&' && peek(1) == '>')) {
      redirect();
    } else if (c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')') {
      end_word();
      const std::size_t begin = pos_++;
      if ((c == '&' || c == '|') && (peek(0) == c || (c == '|' && peek(0) == '&'))) ++pos_;
      push(ShellToken::kSeparator, begin, pos_);
    } else {
      begin_word();
      std::size_t stop = pos_;
      while (stop < line_.size() && plain_char(line_[stop])) ++stop;
      if (stop == pos_) {  // one character that means something to sh ($ * ~ ...)
        exact_ = false;
        ++stop;
      }
      word_.append(line_.substr(pos_, stop - pos_));
      pos_ = stop;
    }
  }

  // A backslash outside quotes keeps the next character as it is; before a newline both
  // disappear (a continuation: sh joins the lines), which the exact subset leaves to sh.
  void escaped() {
    if (peek(1) == '\n') {
      if (in_word_) exact_ = false;
      else next_inexact_ = true;
      pos_ += 2;
      return;
    }
    begin_word();
    if (pos_ + 1 < line_.size()) word_ += line_[pos_ + 1];
    else exact_ = false;  // a trailing backslash
    pos_ += 2;
  }

  void double_quoted() {
    for (++pos_; pos_ < line_.size() && line_[pos_] != '"'; ++pos_) {
      const char c = line_[pos_];
      const char next = peek(1);
      if (c == '\\' && (next == '"' || next == '\\' || next == '$' || next == '`')) {
        word_ += next;
        ++pos_;
      } else if (c == '\\' && next == '\n') {
        exact_ = false;  // a continuation inside the quotes
        ++pos_;
      } else {
        if (c == '$' || c == '`' || c == '\n') exact_ = false;
        word_ += c;
      }
    }
    if (pos_ >= line_.size()) exact_ = false;  // unterminated
    ++pos_;                                     // the closing quote
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
    const std::size_t begin = pos_;
    const char first = line_[pos_++];
    if (first == '&') ++pos_;  // "&>": stdout and stderr
    // ">>", ">|", "<<", "<>" ...: one operator. ">&N" duplicates an fd: no file.
    while (pos_ < line_.size() && (line_[pos_] == '>' || line_[pos_] == '<' ||
                                   line_[pos_] == '|' || line_[pos_] == '&')) {
      if (line_[pos_] == '&') stdout_redirect = false;
      ++pos_;
    }
    push(stdout_redirect ? ShellToken::kStdoutRedirect : ShellToken::kOtherRedirect, begin, pos_);
  }

  void begin_word() {
    if (in_word_) return;
    in_word_ = true;
    word_begin_ = pos_;
    exact_ = !next_inexact_;
    next_inexact_ = false;
  }

  void end_word() {
    if (in_word_) {
      ShellToken& token = push(ShellToken::kWord, word_begin_, std::min(pos_, line_.size()));
      token.exact = exact_;
      token.text = std::move(word_);
    }
    word_.clear();
    in_word_ = quoted_ = false;
  }

  ShellToken& push(ShellToken::Kind kind, std::size_t begin, std::size_t end) {
    ShellToken& token = tokens_.emplace_back();
    token.kind = kind;
    token.begin = static_cast<std::uint32_t>(begin);
    token.end = static_cast<std::uint32_t>(end);
    return token;
  }

  char peek(std::size_t ahead) const {
    return pos_ + ahead < line_.size() ? line_[pos_ + ahead] : '\0';
  }

  std::string_view line_;
  std::size_t pos_ = 0;
  std::string word_;
  std::size_t word_begin_ = 0;
  bool in_word_ = false;       // word_ holds a word being read (possibly empty: "")
  bool quoted_ = false;        // part of it was quoted (so "2" before '>' is a word)
  bool exact_ = true;          // every part of it so far is in the exact subset
  bool next_inexact_ = false;  // a continuation came before the word
  std::vector<ShellToken> tokens_;
};

}  // namespace

std::vector<ShellToken> shell_tokens(std::string_view line) { return ShellTokenizer(line).run(); }

bool is_simple_command(const std::vector<ShellToken>& tokens) {
  if (tokens.empty()) return false;
  for (const ShellToken& token : tokens)
    if (token.kind != ShellToken::kWord || !token.exact) return false;
  // '=' in the first word may make it an assignment (FOO=1 cc ...). A name without a
  // slash can be a builtin or keyword; with a slash the shell executes it as a path.
  const std::string& first = tokens.front().text;
  if (first.empty() || first.find('=') != std::string::npos) return false;
  return first.find('/') != std::string::npos || !is_shell_word(first);
}

std::vector<std::string> word_texts(std::vector<ShellToken>&& tokens) {
  std::vector<std::string> words;
  words.reserve(tokens.size());
  for (ShellToken& token : tokens)
    if (token.kind == ShellToken::kWord) words.push_back(std::move(token.text));
  return words;
}

std::optional<std::vector<std::string>> split_simple_command(std::string_view line) {
  std::vector<ShellToken> tokens = shell_tokens(line);
  if (!is_simple_command(tokens)) return std::nullopt;
  return word_texts(std::move(tokens));
}

bool is_assignment(std::string_view word) {
  const std::size_t eq = word.find('=');
  if (eq == 0 || eq == std::string_view::npos) return false;
  for (std::size_t i = 0; i < eq; ++i) {
    const char c = word[i];
    const bool ok = c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

std::string shell_quote(std::string_view word) {
  const bool safe = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return plain_char(c) && c != '^';
  });
  if (safe) return std::string(word);
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') quoted += "'\"'\"'";
    else quoted += c;
  }
  quoted += '\'';
  return quoted;
}

}  // namespace spawnpool::detail
