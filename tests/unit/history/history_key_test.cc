// Command keys as the history hashes them: the exact key follows argv and cwd byte for
// byte, the fallback key the program and the output path (with the cwd when that path is
// relative), and the hashes stay what the stored history was written with. What the
// program and the output of a command are is tests/unit/command/'s.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/src/history/history_store_key.h"

namespace spawnpool::detail {
namespace {

TEST_CASE("the exact key follows argv and cwd byte for byte", "[memory][key]") {
  const std::vector<std::string> argv = {"g++", "-O2", "-c", "a.cc", "-o", "a.o"};
  const CommandKey key = hash_command_key(argv, "/src", "g++", "a.o");
  CHECK(key.exact != 0);
  CHECK(hash_command_key(argv, "/src", "g++", "a.o").exact == key.exact);
  CHECK(hash_command_key(argv, "/other", "g++", "a.o").exact != key.exact);
  // Field boundaries count: ["ab"] is not ["a", "b"], and the cwd is not an argument.
  CHECK(hash_command_key({"ab"}, "", "ab", "").exact != hash_command_key({"a", "b"}, "", "a", "").exact);
  CHECK(hash_command_key({"x"}, "y", "x", "").exact != hash_command_key({"y", "x"}, "", "y", "").exact);
}

TEST_CASE("the fallback key is the program and the output", "[memory][key]") {
  const CommandKey a = hash_command_key({"g++", "-O2", "-c", "a.cc", "-o", "a.o"}, "/src", "g++", "a.o");
  const CommandKey b = hash_command_key({"g++", "-O3", "-c", "a.cc", "-o", "a.o"}, "/src", "g++", "a.o");
  CHECK(a.fallback != 0);
  CHECK(a.fallback == b.fallback);
  CHECK(hash_command_key({"g++"}, "/src", "g++", "b.o").fallback != a.fallback);
  CHECK(hash_command_key({"clang++"}, "/src", "clang++", "a.o").fallback != a.fallback);
  // A relative output is another file in another directory, an absolute one is not.
  CHECK(hash_command_key({"g++"}, "/elsewhere", "g++", "a.o").fallback != a.fallback);
  CHECK(hash_command_key({"g++"}, "/one", "g++", "/out/a.o").fallback ==
        hash_command_key({"g++", "-O1"}, "/two", "g++", "/out/a.o").fallback);
  CHECK(hash_command_key({"make", "-C", "sub"}, "/src", "make", "").fallback == 0);
  CHECK(hash_command_key({"make"}, "/src", "make", "").program ==
        hash_command_key({"/usr/bin/make", "x"}, "/a", "make", "").program);
}

TEST_CASE("the hashes are the ones stored histories were written with", "[memory][key]") {
  // Changing how keys are made orphans every stored history: bump the schema version
  // (HistoryDatabase::kSchemaVersion) together with these values.
  CHECK(hash_bytes("", 0, 0) == 0ULL);
  CHECK(hash_bytes("spawnpool", 9, 1) == hash_bytes("spawnpool", 9, 1));
  const CommandKey key = hash_command_key({"g++", "-c", "a.cc", "-o", "a.o"}, "/src", "g++", "a.o");
  CHECK(key.exact == 0x7c06b193f1607560ULL);
  CHECK(key.fallback == 0x597dce00c0ed1eaaULL);
  CHECK(key.program == 0x9812a19f99391b9fULL);
}

}  // namespace
}  // namespace spawnpool::detail
