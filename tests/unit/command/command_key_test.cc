// The history key of a prepared command: the hashes of commands without a launcher are
// the ones today's stored histories were written with (values computed with the key code
// of 38a2e4c, before the one parser), a compile behind a launcher is keyed by its
// compiler, and the exact key follows what runs (direct exec's words).
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/src/command/command_key.h"
#include "engine/src/command/direct_exec.h"
#include "engine/src/command/prepare_command.h"
#include "tests/unit/command/command_test_support.h"

namespace spawnpool::detail {
namespace {

using Argv = std::vector<std::string>;

CommandKey key_of(const Argv& argv, const std::string& cwd) {
  Command command;
  command.argv = argv;
  command.cwd = cwd;
  command.env = std::vector<std::string>{"PATH=/usr/bin:/bin"};
  return make_command_key(prepare_command(command));
}

struct StoredKey {
  Argv argv;
  std::string cwd;
  std::uint64_t exact, fallback, program;
};

TEST_CASE("commands without a launcher keep the keys stored histories hold", "[command][key]") {
  // Changing these orphans every stored history: bump HistoryDatabase::kSchemaVersion
  // together with them.
  const StoredKey c = GENERATE(values<StoredKey>({
      {{"g++", "-c", "a.cc", "-o", "a.o"}, "/src",
       0x7c06b193f1607560ULL, 0x597dce00c0ed1eaaULL, 0x9812a19f99391b9fULL},
      {{"gcc", "-O2", "-Wall", "-Iinclude", "-c", "-o", "build/foo.o", "src/foo.c"}, "/home/u/proj",
       0x2cc6b956d4321392ULL, 0xce3c6184c6d0e080ULL, 0x17869227428f5f4aULL},
      {{"/usr/bin/cc", "-o", "prog", "main.o", "util.o", "-lm"}, "/tmp/b",
       0x63b394937cc01d95ULL, 0xa30b872542d0c773ULL, 0x50446377be289fc3ULL},
      {{"ar", "rc", "libx.a", "a.o", "b.o"}, "/src",
       0x6473991ab5af3eebULL, 0, 0x1d806b3a30ff88cdULL},
      {{"ranlib", "libx.a"}, "/src", 0xf36f77f089ff2256ULL, 0, 0x997a367f50ff91cdULL},
      {{"python3", "gen.py", "--output=gen.h"}, "/src",
       0x6d5f4fc3af4cb49fULL, 0x32a6ad30243cc8beULL, 0xd68c73716062644bULL},
      {{"env", "CC=cc", "nice", "-n", "5", "cc", "-o", "a", "a.c"}, "/w",
       0xb5a6339cd78dc708ULL, 0x0ad1d775ea3a799fULL, 0x50446377be289fc3ULL},
      {{"sh", "-c", "gcc -o build/x.o -c x.c"}, "/src",
       0x052f8e830baa39cdULL, 0x9901592e9fb8b1e0ULL, 0x17869227428f5f4aULL},
      {{"sh", "-c", "g++ -o \"out dir/a.o\" -c 'a b.cc'"}, "/src",
       0x3c02453aff174486ULL, 0xa5793e6978608ea2ULL, 0x9812a19f99391b9fULL},
      {{"/bin/sh", "-c", "cd build && gcc -c ../x.c -o x.o"}, "/src",
       0x4c61c0dc391e43aaULL, 0xe9aa7b4f57643764ULL, 0x17869227428f5f4aULL},
      {{"sh", "-c", "python3 gen.py > gen.h"}, "/src",
       0x6fc451dcb93ca923ULL, 0x32a6ad30243cc8beULL, 0xd68c73716062644bULL},
      {{"sh", "-c", "protoc x.proto 2> err.log >out.pb.h"}, "/src",
       0x55fc723ce8d1f931ULL, 0x964d4ffdccc9393aULL, 0x35dcc547b4bdea40ULL},
      {{"bash", "-ec", "echo hi; mkdir -p o && ar rcs o/libx.a a.o > /dev/null"}, "/src",
       0x9fc070efbdd62e9bULL, 0, 0x1d806b3a30ff88cdULL},
      {{"sh", "-c", "gcc -E x.c | sed s/a/b/ > x.i"}, "/src",
       0xe1aac0a342fb8b9fULL, 0x10cfddd556784701ULL, 0x17869227428f5f4aULL},
      {{"sh", "-c", "rm -f x.o && cc -c x.c -o x.o # a comment -o y"}, "/src",
       0xd36cd15abbba6869ULL, 0x3fac399439b1063dULL, 0x50446377be289fc3ULL},
      {{"dash", "-xc", "exec ld -o prog main.o"}, "/src",
       0xfa830ad59b495531ULL, 0x5d70e81aa5642113ULL, 0x96b879839b4e95f8ULL},
      {{"sh", "-c", "CC=gcc env -i FOO=1 nice -n 5 make -C sub"}, "/src",
       0x4adeee30e8e04a2eULL, 0, 0x51c683c2a5ce8425ULL},
      {{"sh", "-c", "tool &> both.log"}, "/src",
       0x3c3b2f59dcfae07eULL, 0x214102eddeb0023fULL, 0xbe254f747627ad58ULL},
      {{"sh", "-c", "echo done"}, "/src", 0x7be49eba3efe4091ULL, 0, 0xf9ec24a3464324c4ULL},
      {{"make", "-C", "sub"}, "/src", 0x75c3432e26d87327ULL, 0, 0x51c683c2a5ce8425ULL},
      {{"sh", "-c", "cc -O2 -Wall -Ilib -Igen -c -o lib/checksum.o lib/checksum.c"}, "/p",
       0x5e91e1f6fdab89d7ULL, 0x09662c7d6c9d1596ULL, 0x50446377be289fc3ULL},
      {{"cc", "-O2", "-Wall", "-Ilib", "-Igen", "-c", "-o", "lib/checksum.o", "lib/checksum.c"},
       "/p", 0x90be703fbde9bfb1ULL, 0x09662c7d6c9d1596ULL, 0x50446377be289fc3ULL},
      {{"sh", "-c", "gcc -o $OUT -c x.c"}, "/src",
       0xc7ae4952537aaee4ULL, 0x54db21e1974e5526ULL, 0x17869227428f5f4aULL},
      {{"sh", "-c", "A=$(foo) gcc -o x.o"}, "/src",
       0x0a9be3fee1082a9bULL, 0xd9bbf2b01f4e227cULL, 0xaabc00b21cb3a7b8ULL},
  }));
  CAPTURE(c.argv, c.cwd);
  const CommandKey key = key_of(c.argv, c.cwd);
  CHECK(key.exact == c.exact);
  CHECK(key.fallback == c.fallback);
  CHECK(key.program == c.program);
}

TEST_CASE("a direct-exec'd line keys as its words, as before", "[command][key]") {
  // The default stack ran `sh -c LINE` as LINE's words, and the pool keyed those: the
  // exact key is made from what runs, so that it stays.
  Command command;
  command.argv = {"sh", "-c", "cc -O2 -Wall -Ilib -Igen -c -o lib/checksum.o lib/checksum.c"};
  command.cwd = "/p";
  command.env = std::vector<std::string>{"PATH=/usr/bin:/bin"};
  CommandKey seen;
  test::FakeLayer bottom([&](PreparedCommand& prepared) {
    seen = make_command_key(prepared);
    return test::ran(0);
  });
  DirectExec direct(bottom);
  PreparedCommand prepared = prepare_command(command);
  direct.run(prepared);
  CHECK(seen.exact == 0x90be703fbde9bfb1ULL);
  CHECK(seen.fallback == 0x09662c7d6c9d1596ULL);
  CHECK(seen.program == 0x50446377be289fc3ULL);
}

TEST_CASE("a compile behind a launcher is keyed by its compiler", "[command][key]") {
  const CommandKey gcc = key_of({"gcc", "-c", "a.c", "-o", "a.o"}, "/src");
  const CommandKey gxx = key_of({"g++", "-c", "b.cc", "-o", "b.o"}, "/src");
  // Written with the launcher in the line: before, `distcc` and `ccache` (0xfa0656ae...,
  // 0x9206d164...) for every compile.
  const CommandKey distcc = key_of({"sh", "-c", "distcc gcc -c a.c -o a.o"}, "/src");
  const CommandKey distcc_argv = key_of({"distcc", "gcc", "-c", "a.c", "-o", "a.o"}, "/src");
  const CommandKey ccache = key_of({"/usr/bin/ccache", "g++", "-c", "b.cc", "-o", "b.o"}, "/src");
  CHECK(distcc.program == gcc.program);
  CHECK(distcc.fallback == gcc.fallback);
  CHECK(distcc_argv.program == gcc.program);
  CHECK(ccache.program == gxx.program);
  CHECK(ccache.fallback == gxx.fallback);
  CHECK(distcc.program != 0xfa0656ae5384d443ULL);
  CHECK(ccache.program != 0x9206d1646dafaac8ULL);
  // The exact key is still the command's own (what runs, launcher and all).
  CHECK(distcc_argv.exact != gcc.exact);
}

TEST_CASE("the exact key follows argv and cwd byte for byte", "[command][key]") {
  const Argv argv = {"g++", "-O2", "-c", "a.cc", "-o", "a.o"};
  const CommandKey key = key_of(argv, "/src");
  CHECK(key.exact != 0);
  CHECK(key_of(argv, "/src").exact == key.exact);
  CHECK(key_of(argv, "/other").exact != key.exact);
  CHECK(key_of({"g++", "-O3", "-c", "a.cc", "-o", "a.o"}, "/src").exact != key.exact);
  // Field boundaries count: ["ab"] is not ["a", "b"], and the cwd is not an argument.
  CHECK(key_of({"ab"}, "/").exact != key_of({"a", "b"}, "/").exact);
  CHECK(key_of({"x"}, "/y").exact != key_of({"/y", "x"}, "/").exact);
}

TEST_CASE("the fallback key survives a flag change but not another output", "[command][key]") {
  const CommandKey o2 = key_of({"g++", "-O2", "-c", "a.cc", "-o", "a.o"}, "/src");
  const CommandKey o3 = key_of({"g++", "-O3", "-g", "-c", "a.cc", "-o", "a.o"}, "/src");
  const CommandKey shell = key_of({"sh", "-c", "g++ -O0 -c a.cc -o a.o"}, "/src");
  CHECK(o2.fallback != 0);
  CHECK(o2.exact != o3.exact);
  CHECK(o2.fallback == o3.fallback);
  CHECK(o2.fallback == shell.fallback);  // the same compile, run through the shell
  CHECK(key_of({"g++", "-c", "b.cc", "-o", "b.o"}, "/src").fallback != o2.fallback);
  CHECK(key_of({"clang++", "-c", "a.cc", "-o", "a.o"}, "/src").fallback != o2.fallback);
  // A relative output is another file in another directory, an absolute one is not.
  CHECK(key_of({"g++", "-c", "a.cc", "-o", "a.o"}, "/elsewhere").fallback != o2.fallback);
  CHECK(key_of({"g++", "-o", "/out/a.o"}, "/one").fallback ==
        key_of({"g++", "-O1", "-o", "/out/a.o"}, "/two").fallback);
  CHECK(key_of({"make", "-C", "sub"}, "/src").fallback == 0);
}

TEST_CASE("the program key names the program whatever its path", "[command][key]") {
  const CommandKey plain = key_of({"g++", "-c", "a.cc"}, "/src");
  CHECK(plain.program != 0);
  CHECK(key_of({"/usr/bin/g++", "-c", "b.cc"}, "/x").program == plain.program);
  CHECK(key_of({"sh", "-c", "g++ -c c.cc"}, "/y").program == plain.program);
  CHECK(key_of({"gcc", "-c", "a.cc"}, "/src").program != plain.program);
}

}  // namespace
}  // namespace spawnpool::detail
