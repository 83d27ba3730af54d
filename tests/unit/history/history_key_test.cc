// Command keys: the exact key follows argv and cwd byte for byte, the fallback key
// survives a flag change (program and output path, found in argv or an `sh -c` line),
// and the hashes stay what the stored history was written with.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/src/history/history_store_key.h"

namespace spawnpool::detail {
namespace {

using Argv = std::vector<std::string>;

struct IdentityCase {
  Argv argv;
  std::string program;
  std::string output;
};

TEST_CASE("identify_command finds the program and the output path", "[memory][key]") {
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
      {{"sh", "-c", "CC=gcc env -i FOO=1 nice -n 5 make -C sub"}, "make", ""},
      {{"bash", "-ec", "echo hi; mkdir -p o && ar rcs o/libx.a a.o > /dev/null"}, "ar", ""},
      {{"sh", "-c", "gcc -E x.c | sed s/a/b/ > x.i"}, "gcc", "x.i"},
      {{"sh", "-c", "echo done"}, "echo", ""},
      {{"sh", "-c", "rm -f x.o && cc -c x.c -o x.o # a comment -o y"}, "cc", "x.o"},
      {{"dash", "-xc", "exec ld -o prog main.o"}, "ld", "prog"},
  }));
  CAPTURE(c.argv);
  const CommandIdentity identity = identify_command(c.argv);
  CHECK(identity.program == c.program);
  CHECK(identity.output == c.output);
}

TEST_CASE("a quoted fd number is a word, not a redirection's fd", "[memory][key]") {
  // `tool "2">x.log` passes the argument "2" and sends stdout to x.log.
  const CommandIdentity identity = identify_command({"sh", "-c", "tool \"2\">x.log"});
  CHECK(identity.output == "x.log");
}

TEST_CASE("the exact key follows argv and cwd byte for byte", "[memory][key]") {
  const Argv argv = {"g++", "-O2", "-c", "a.cc", "-o", "a.o"};
  const CommandKey key = make_command_key(argv, "/src");
  CHECK(key.exact != 0);
  CHECK(make_command_key(argv, "/src").exact == key.exact);
  CHECK(make_command_key(argv, "/other").exact != key.exact);
  CHECK(make_command_key({"g++", "-O3", "-c", "a.cc", "-o", "a.o"}, "/src").exact != key.exact);
  // Field boundaries count: ["ab"] is not ["a", "b"], and the cwd is not an argument.
  CHECK(make_command_key({"ab"}, "").exact != make_command_key({"a", "b"}, "").exact);
  CHECK(make_command_key({"x"}, "y").exact != make_command_key({"y", "x"}, "").exact);
}

TEST_CASE("the fallback key survives a flag change but not another output", "[memory][key]") {
  const CommandKey o2 = make_command_key({"g++", "-O2", "-c", "a.cc", "-o", "a.o"}, "/src");
  const CommandKey o3 = make_command_key({"g++", "-O3", "-g", "-c", "a.cc", "-o", "a.o"}, "/src");
  const CommandKey shell = make_command_key({"sh", "-c", "g++ -O0 -c a.cc -o a.o"}, "/src");
  CHECK(o2.fallback != 0);
  CHECK(o2.exact != o3.exact);
  CHECK(o2.fallback == o3.fallback);
  CHECK(o2.fallback == shell.fallback);  // the same compile, run through the shell
  CHECK(make_command_key({"g++", "-c", "b.cc", "-o", "b.o"}, "/src").fallback != o2.fallback);
  CHECK(make_command_key({"clang++", "-c", "a.cc", "-o", "a.o"}, "/src").fallback != o2.fallback);

  SECTION("a relative output is another file in another directory, an absolute one is not") {
    CHECK(make_command_key({"g++", "-c", "a.cc", "-o", "a.o"}, "/elsewhere").fallback != o2.fallback);
    CHECK(make_command_key({"g++", "-o", "/out/a.o"}, "/one").fallback ==
          make_command_key({"g++", "-O1", "-o", "/out/a.o"}, "/two").fallback);
  }
  SECTION("no output path, no fallback key") {
    CHECK(make_command_key({"make", "-C", "sub"}, "/src").fallback == 0);
  }
}

TEST_CASE("the program key names the program whatever its path", "[memory][key]") {
  const CommandKey plain = make_command_key({"g++", "-c", "a.cc"}, "/src");
  CHECK(plain.program != 0);
  CHECK(make_command_key({"/usr/bin/g++", "-c", "b.cc"}, "/x").program == plain.program);
  CHECK(make_command_key({"sh", "-c", "g++ -c c.cc"}, "/y").program == plain.program);
  CHECK(make_command_key({"gcc", "-c", "a.cc"}, "/src").program != plain.program);
}

TEST_CASE("the hashes are the ones stored histories were written with", "[memory][key]") {
  // Changing how keys are made orphans every stored history: bump the schema version
  // (HistoryDatabase::kSchemaVersion) together with these values.
  CHECK(hash_bytes("", 0, 0) == 0ULL);
  CHECK(hash_bytes("spawnpool", 9, 1) == hash_bytes("spawnpool", 9, 1));
  const CommandKey key = make_command_key({"g++", "-c", "a.cc", "-o", "a.o"}, "/src");
  CHECK(key.exact == 0x7c06b193f1607560ULL);
  CHECK(key.fallback == 0x597dce00c0ed1eaaULL);
  CHECK(key.program == 0x9812a19f99391b9fULL);
}

}  // namespace
}  // namespace spawnpool::detail
