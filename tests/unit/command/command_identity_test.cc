// What a command is: the one "sh -c" predicate and its set of shells, and the program and
// output found in an argv or a shell line (past wrappers and compiler launchers), as
// prepare_command() records them.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/src/command/command_identity.h"
#include "engine/src/command/prepare_command.h"
#include "engine/src/command/shell_invocation.h"

namespace spawnpool::detail {
namespace {

using Argv = std::vector<std::string>;

TEST_CASE("one predicate says which argv runs a shell line", "[command][shell]") {
  struct Case {
    Argv argv;
    bool shell;
    bool as_dash;
  };
  const Case c = GENERATE(values<Case>({
      {{"sh", "-c", "x"}, true, true},
      {{"/bin/sh", "-c", "x"}, true, true},
      {{"/usr/bin/sh", "-c", "x"}, true, true},
      {{"dash", "-c", "x"}, true, true},
      {{"/usr/bin/dash", "-c", "x"}, true, true},
      {{"/opt/sh", "-c", "x"}, true, false},     // any shell may live there
      {{"bash", "-c", "x"}, true, false},        // another shell's conventions
      {{"/bin/zsh", "-c", "x"}, true, false},
      {{"ksh", "-c", "x"}, true, false},
      {{"sh", "-ec", "x"}, true, false},         // options: not exactly dash's -c
      {{"sh", "-c", "x", "arg0", "a"}, true, false},
      {{"sh", "-e", "-c", "x"}, false, false},
      {{"sh", "--c", "x"}, false, false},
      {{"sh", "-c"}, false, false},
      {{"sh", "script.sh"}, false, false},
      {{"python3", "-c", "x"}, false, false},
      {{"cc", "-c", "a.c"}, false, false},
      {{}, false, false},
  }));
  CAPTURE(c.argv);
  const auto shell = shell_invocation(c.argv);
  CHECK(bool(shell) == c.shell);
  if (shell) {
    CHECK(shell->line_index == 2);
    CHECK(shell->as_dash == c.as_dash);
  }
}

TEST_CASE("the predicate looks behind wrappers when asked where to look", "[command][shell]") {
  const Argv argv = {"env", "X=1", "bash", "-ec", "gcc -c a.c"};
  const auto shell = shell_invocation(argv, 2);
  REQUIRE(shell);
  CHECK(shell->line_index == 4);
  CHECK_FALSE(shell_invocation(argv));
}

struct IdentityCase {
  Argv argv;
  std::string program;  // file name
  std::string output;
};

TEST_CASE("the program and the output path of a command", "[command][identity]") {
  const IdentityCase c = GENERATE(values<IdentityCase>({
      {{"g++", "-c", "-O2", "-o", "foo.o", "foo.cc"}, "g++", "foo.o"},
      {{"/usr/bin/gcc", "-ofoo.o", "-c", "x.c"}, "gcc", "foo.o"},
      {{"ld", "--output=app", "a.o"}, "ld", "app"},
      {{"ld", "--output", "app", "a.o"}, "ld", "app"},
      {{"env", "CC=cc", "cc", "-o", "a", "a.c"}, "cc", "a"},
      {{"gcc", "-o", "/dev/null", "-c", "probe.c"}, "gcc", ""},
      {{"ar", "rcs", "libx.a", "a.o"}, "ar", ""},
      {{"sh", "script.sh"}, "sh", ""},
      {{"sh", "-c"}, "sh", ""},
      {{}, "", ""},
      // Shell lines: quoting, separators, wrappers, redirections.
      {{"sh", "-c", "g++ -o 'out dir/x.o' -c x.cc"}, "g++", "out dir/x.o"},
      {{"sh", "-c", "gcc \"-o\" \"x y.o\" z.c"}, "gcc", "x y.o"},
      {{"sh", "-c", "gcc -o x\\ y.o z.c"}, "gcc", "x y.o"},
      {{"/bin/sh", "-c", "cd build && gcc -c ../x.c -o x.o"}, "gcc", "x.o"},
      {{"sh", "-c", "python3 gen.py > gen.h"}, "python3", "gen.h"},
      {{"sh", "-c", "python3 gen.py >gen.h"}, "python3", "gen.h"},
      {{"sh", "-c", "protoc x.proto 2> err.log >out.pb.h"}, "protoc", "out.pb.h"},
      {{"sh", "-c", "cat a b 1>>all.txt"}, "cat", "all.txt"},
      {{"sh", "-c", "tool 2>&1 >x.log"}, "tool", "x.log"},
      {{"sh", "-c", "tool &> both.log"}, "tool", "both.log"},
      {{"sh", "-c", "tool >&2"}, "tool", ""},
      {{"sh", "-c", "tool \"2\">x.log"}, "tool", "x.log"},  // a quoted "2" is a word
      {{"sh", "-c", "CC=gcc env -i FOO=1 nice -n 5 make -C sub"}, "make", ""},
      {{"bash", "-ec", "echo hi; mkdir -p o && ar rcs o/libx.a a.o > /dev/null"}, "ar", ""},
      {{"sh", "-c", "gcc -E x.c | sed s/a/b/ > x.i"}, "gcc", "x.i"},
      {{"sh", "-c", "echo done"}, "echo", ""},
      {{"sh", "-c", "rm -f x.o && cc -c x.c -o x.o # a comment -o y"}, "cc", "x.o"},
      {{"dash", "-xc", "exec ld -o prog main.o"}, "ld", "prog"},
      {{"nice", "sh", "-c", "gcc -o a.o -c a.c"}, "gcc", "a.o"},
      // The compiler behind a launcher, not the launcher.
      {{"distcc", "gcc", "-c", "a.c", "-o", "a.o"}, "gcc", "a.o"},
      {{"/usr/bin/ccache", "g++", "-c", "b.cc", "-o", "b.o"}, "g++", "b.o"},
      {{"sh", "-c", "ccache distcc gcc -c a.c -o a.o && touch stamp"}, "gcc", "a.o"},
      {{"sh", "-c", "icecc clang++ -c a.cc"}, "clang++", ""},
      {{"sccache", "cc", "-c", "a.c"}, "cc", ""},
      {{"ccache", "-s"}, "ccache", ""},   // the launcher's own option: it is the program
      {{"distcc"}, "distcc", ""},
      // A continuation is nothing: the program is the word after it.
      {{"sh", "-c", "\\\ngcc -o a.o -c a.c"}, "gcc", "a.o"},
  }));
  CAPTURE(c.argv);
  const CommandIdentity identity = identify_command(c.argv);
  CHECK(file_name(identity.program) == c.program);
  CHECK(identity.output == c.output);
  // prepare_command() records the same (for a simple dash line, from its words).
  Command command;
  command.argv = c.argv;
  command.env = std::vector<std::string>{};
  const PreparedCommand prepared = prepare_command(command);
  CHECK(prepared.program_name == c.program);
  CHECK(prepared.output == c.output);
}

TEST_CASE("the program is kept as written", "[command][identity]") {
  Command command;
  command.argv = {"sh", "-c", "/usr/bin/g++ -c a.cc"};
  const PreparedCommand prepared = prepare_command(command);
  CHECK(prepared.program == "/usr/bin/g++");
  CHECK(prepared.program_name == "g++");
}

}  // namespace
}  // namespace spawnpool::detail
