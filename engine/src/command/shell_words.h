// The one shell-word parser: a POSIX sh line cut into words and operators, each word
// marked exact when it uses only the subset of the grammar in which quote removal is
// exactly what dash does (so its text is the argument sh would pass). Direct exec, the
// compile classifier, the launcher and the history key all read lines through it.
// Pure functions; no threading concerns.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace spawnpool::detail {

/// A piece of a shell line. Words carry their text after quote removal (expansions,
/// globs and the like are kept as written: the text is stable, not what sh would expand).
struct ShellToken {
  enum Kind : std::uint8_t {
    kWord,
    kSeparator,       ///< ; & && || | |& ( ) or a newline: ends a simple command
    kStdoutRedirect,  ///< > >> >| 1> &> ...: the next word is the file stdout goes to
    kOtherRedirect,   ///< < 2> >&2 <<...: the next word, if any, is its operand
    kComment,         ///< # to the end of the line
  };
  Kind kind = kWord;
  /// A word of the exact subset: A-Za-z0-9 and `_-./,:+=@%^` unquoted, 'single quotes'
  /// (no newline), "double quotes" without $, ` or a newline (a backslash escapes $ ` "
  /// and itself there, and stays literal before anything else), a backslash before any
  /// character but a newline. That covers what SCons writes (its escape() and quote_spaces()).
  bool exact = false;
  std::uint32_t begin = 0;  ///< where it starts in the line (byte offset)
  std::uint32_t end = 0;    ///< one past its last byte
  std::string text;         ///< words only
};

/// Cuts `line` into tokens as sh reads it: blanks are spaces and tabs, `#` at the start
/// of a word opens a comment, a backslash-newline disappears.
std::vector<ShellToken> shell_tokens(std::string_view line);

/// Whether a line's tokens are a command sh would run as the argv of their texts: every
/// token an exact word, the first neither empty, nor an assignment (a '=' in it), nor,
/// when it has no '/', a reserved word or builtin of dash or bash ("ask the shell").
bool is_simple_command(const std::vector<ShellToken>& tokens);

/// The texts of `tokens`' words, moved out.
std::vector<std::string> word_texts(std::vector<ShellToken>&& tokens);

/// The argv `sh -c line` would execute when the line is a simple command, else nothing:
/// the Python package's split_simple_command().
std::optional<std::vector<std::string>> split_simple_command(std::string_view line);

/// Whether `word` starts as a variable assignment does (NAME=...). Applied to a word as
/// written in a line (so `"A"=1`, which sh runs as a command, is not one) or to an argv
/// entry.
bool is_assignment(std::string_view word);

/// `word` quoted for a sh line so that the shell reads it back unchanged (as Python's
/// shlex.quote: as it is when it holds only `A-Za-z0-9_@%+=:,./-`, else in single quotes).
std::string shell_quote(std::string_view word);

}  // namespace spawnpool::detail
