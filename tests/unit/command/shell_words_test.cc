// The one shell-word parser: the lines it takes give dash's argv (checked against the
// real dash for hand-written lines, SCons-escaped arguments and random lines), the lines
// it refuses need a shell; its tokens (offsets, operators, redirections, comments) are
// what the classifier and the history key read.
#include <catch2/catch.hpp>
#include <random>
#include <string>
#include <vector>

#include "engine/src/command/shell_words.h"
#include "tests/unit/command/command_test_support.h"
#include "tests/unit/support/test_skip.h"

namespace spawnpool::test {
namespace {

using detail::ShellToken;
using detail::split_simple_command;
using Words = std::vector<std::string>;

const std::string P = "print_argv";

// Lines the parser must take; each must give dash's argv.
const std::vector<std::string> kAccepted = {
    P,
    P + " a b c",
    P + "   a\tb  ",
    P + " \"a b\" 'c d' e\\ f",
    P + " \"\" '' a\"\"b",
    P + R"( "a\\b" "\$x" "\`" "\"" "\q" "\\")",
    P + R"( 'a\b' 'a"b' '$x' '`x`' '*' '~' '#' '!' '{a,b}' ';' '|&<>()' ' ' )",
    P + R"( \$ \\ \a \' \" \* \~ \# \  \; \! \{ \})",
    P + " -DFOO=1 -I. -o out/a.o --flag=x,y:z +a @file %d ^x",
    P + " a=b x==y",
    P + " x\"y\"z 'p'q \"1\"'2'3",
    "\"" + P + "\" a",
    "'" + P + "' 'a'",
    P + " \"a\ttab\" 'b\tc'",
    P + " \"quoted\\ back\\slash\" \"\\n\" '\\n'",
    P + " \"été\" 'ü'",
    "cc -O2 -Wall -Ilib -Igen -c -o lib/checksum.o lib/checksum.c",
    // Not taken by the Python parser: a continuation with no word after it is nothing.
    P + " a \\\n",
};

// Lines that need a shell (or are too odd to take the risk): the parser must refuse.
const std::vector<std::string> kRefused = {
    "", "   ", "\t",
    P + " $HOME", P + " ${x}", P + " $(date)", P + " `date`", P + " \"a $x\"", P + " \"`x`\"",
    P + " \"$\"", P + " a > f", P + " a < f", P + " a 2>&1", P + " a | cat", P + " a; " + P,
    P + " a && " + P, P + " a || " + P, P + " a &", P + " *", P + " a?", P + " [ab]",
    P + " ~", P + " ~/x", P + " a=~/x", P + " {a,b}", P + " #c", P + " a#b", "FOO=1 " + P,
    "A=1", P + " !x", P + " (a)", P + " a\\\nb", P + " 'a\nb'", P + " \"a\nb\"",
    P + " a\nb", P + " \"unterminated", P + " 'unterminated", P + " trailing\\",
    P + " é", "echo hi", "true", "false", "test -f x", "[ -f x ]", "cd /", "exit 3",
    ". ./x", ": x", "exec " + P, "command " + P, "kill 0", "printf x", "pwd", "read x",
    "if", "while", "time " + P, "! " + P, "\"echo\" hi", "'exit' 3", "\"\"", "'' a",
    P + " \"a\\\nb\"",
};

// dash's argv (after argv[0]) for `line`, run with the helpers on PATH.
Words dash_args(const std::string& line) {
  const Outcome o = run_directly("/bin/dash", {"dash", "-c", line}, helper_env(), "");
  INFO("dash -c " << line << ": " << o.err);
  REQUIRE(o.status == 0);
  REQUIRE(o.err.empty());
  return parse_print_argv(o.out).args;
}

TEST_CASE("the parser gives dash's argv for the lines it takes", "[command][shell]") {
  TEST_SKIP_UNLESS(have_dash(), "/bin/dash is not installed");
  for (const std::string& line : kAccepted) {
    CAPTURE(line);
    const auto words = split_simple_command(line);
    REQUIRE(words);
    if ((*words)[0] != P) continue;
    CHECK(Words(words->begin() + 1, words->end()) == dash_args(line));
  }
}

TEST_CASE("the parser's words, written out", "[command][shell]") {
  CHECK(*split_simple_command(P + " \"a b\" 'c d' e\\ f") == Words{P, "a b", "c d", "e f"});
  CHECK(*split_simple_command(P + " \"\" '' a\"\"b") == Words{P, "", "", "ab"});
  CHECK(*split_simple_command(P + R"( "a\\b" "\$x" "\q")") == Words{P, "a\\b", "$x", "\\q"});
  CHECK(*split_simple_command("/usr/bin/gcc -c a.c") == Words{"/usr/bin/gcc", "-c", "a.c"});
  // A builtin's name is a program when written with a slash.
  CHECK(*split_simple_command("/bin/echo hi") == Words{"/bin/echo", "hi"});
}

TEST_CASE("the parser refuses what needs a shell", "[command][shell]") {
  for (const std::string& line : kRefused) {
    CAPTURE(line);
    CHECK_FALSE(split_simple_command(line));
  }
}

// SCons' posix escape() and quote_spaces() (SCons/Platform/posix.py, SCons/Subst.py).
std::string scons_escape(const std::string& arg) {
  std::string out = "\"";
  for (char c : arg) {
    if (c == '\\' || c == '"' || c == '$') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string scons_quote_spaces(const std::string& arg) {
  return arg.find_first_of(" \t") == std::string::npos ? arg : "\"" + arg + "\"";
}

const std::vector<std::string> kOddArguments = {
    "plain", "with space", "tab\there", "dq\"inside", "dollar$x", "${HOME}", "back\\slash",
    "ends with\\", "\\\\double", "single'q", "semi;colon", "amp&", "pipe|", "lt<gt>",
    "star*", "q?", "br[a]", "tilde~", "~lead", "hash#", "#lead", "bang!", "paren()",
    "brace{a,b}", "eq=sign", "", " ", "-", "--opt=\"v a l\"", "été", "'",
    "\"", "$", "\\", "\\\"", "\\$", "$$", "a\\nb",
};

TEST_CASE("SCons-escaped arguments are taken, and give dash's argv", "[command][shell]") {
  TEST_SKIP_UNLESS(have_dash(), "/bin/dash is not installed");
  for (const std::string& arg : kOddArguments) {
    const std::string line = P + " " + scons_escape(arg) + " x";
    CAPTURE(line);
    const auto words = split_simple_command(line);
    REQUIRE(words);
    CHECK(*words == Words{P, arg, "x"});
    CHECK(Words(words->begin() + 1, words->end()) == dash_args(line));
  }
  // Backquotes are not escaped by SCons: inside "..." the shell would run them.
  CHECK_FALSE(split_simple_command(P + " " + scons_escape("a`b`")));
  // quote_spaces (what non-literal arguments with blanks get): whatever is taken is exact.
  int taken = 0;
  for (const std::string& arg : kOddArguments) {
    const std::string line = P + " " + scons_quote_spaces(arg) + " x";
    CAPTURE(line);
    if (const auto words = split_simple_command(line)) {
      ++taken;
      CHECK(Words(words->begin() + 1, words->end()) == dash_args(line));
    }
  }
  CHECK(taken >= 10);
}

TEST_CASE("random lines the parser takes give dash's argv", "[command][shell]") {
  TEST_SKIP_UNLESS(have_dash(), "/bin/dash is not installed");
  std::mt19937 rng(6);
  const std::string alphabet = "ab  =-./\\\\\"\"''$`*?~#;|&<>(){}![]\t%^@:,+";
  int accepted = 0;
  for (int i = 0; i < 400; ++i) {
    std::string line = P + " ";
    const int length = std::uniform_int_distribution<int>(1, 10)(rng);
    for (int c = 0; c < length; ++c)
      line += alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    const auto words = split_simple_command(line);
    if (!words) continue;
    CAPTURE(line);
    CHECK(Words(words->begin() + 1, words->end()) == dash_args(line));
    ++accepted;
  }
  CHECK(accepted >= 30);
}

TEST_CASE("tokens carry offsets, operators and redirections", "[command][shell]") {
  const std::string line = "A=1 gcc -c 'a b.c' 2>err >out && touch x # done";
  const std::vector<ShellToken> tokens = detail::shell_tokens(line);
  REQUIRE(tokens.size() == 12);
  CHECK(tokens[0].text == "A=1");
  CHECK(line.substr(tokens[1].begin, tokens[1].end - tokens[1].begin) == "gcc");
  CHECK(tokens[3].text == "a b.c");
  CHECK(line.substr(tokens[3].begin, tokens[3].end - tokens[3].begin) == "'a b.c'");
  CHECK(tokens[4].kind == ShellToken::kOtherRedirect);  // 2>: the fd number is part of it
  CHECK(tokens[5].text == "err");
  CHECK(tokens[6].kind == ShellToken::kStdoutRedirect);
  CHECK(tokens[7].text == "out");
  CHECK(tokens[8].kind == ShellToken::kSeparator);
  CHECK(line.substr(tokens[8].begin, tokens[8].end - tokens[8].begin) == "&&");
  CHECK(tokens[11].kind == ShellToken::kComment);
  // A continuation joins lines; no empty word is left where it was.
  const std::vector<ShellToken> joined = detail::shell_tokens("gcc \\\n-c a.c");
  REQUIRE(joined.size() == 3);
  CHECK(joined[1].text == "-c");
  CHECK_FALSE(joined[1].exact);
  // Expansions are kept as written (stable text), but are not exact.
  const std::vector<ShellToken> expansion = detail::shell_tokens("cc -o \"$OUT\" x.c");
  CHECK(expansion[2].text == "$OUT");
  CHECK_FALSE(expansion[2].exact);
}

TEST_CASE("assignments are recognised as written", "[command][shell]") {
  CHECK(detail::is_assignment("CC=gcc"));
  CHECK(detail::is_assignment("_x1=\"a b\""));
  CHECK_FALSE(detail::is_assignment("\"CC\"=gcc"));
  CHECK_FALSE(detail::is_assignment("1A=x"));
  CHECK_FALSE(detail::is_assignment("=x"));
  CHECK_FALSE(detail::is_assignment("gcc"));
}

TEST_CASE("quoted words read back unchanged", "[command][shell]") {
  CHECK(detail::shell_quote("/usr/bin/distcc") == "/usr/bin/distcc");
  CHECK(detail::shell_quote("") == "''");
  CHECK(detail::shell_quote("a b") == "'a b'");
  CHECK(detail::shell_quote("it's") == "'it'\"'\"'s'");
  CHECK(detail::shell_quote("^x") == "'^x'");  // as Python's shlex.quote
  for (const std::string& arg : kOddArguments) {
    if (arg.empty()) continue;
    CAPTURE(arg);
    const auto words = split_simple_command(P + " " + detail::shell_quote(arg));
    REQUIRE(words);
    CHECK((*words)[1] == arg);
  }
}

}  // namespace
}  // namespace spawnpool::test
