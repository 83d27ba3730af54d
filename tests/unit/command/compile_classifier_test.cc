// Which commands are C/C++ compiles (the tables of tests/distributed/test_classifier.py),
// as prepare_command() records them, and where a launcher goes in the line.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "engine/src/command/compile_classifier.h"
#include "engine/src/command/prepare_command.h"

namespace spawnpool::detail {
namespace {

PreparedCommand prepared_line(const std::string& line,
                              const CompileClassifier& classifier = CompileClassifier::default_compilers()) {
  Command command;
  command.argv = {"sh", "-c", line};
  command.env = std::vector<std::string>{};
  return prepare_command(command, classifier);
}

bool is_compile_line(const std::string& line,
                     const CompileClassifier& classifier = CompileClassifier::default_compilers()) {
  return prepared_line(line, classifier).compile;
}

TEST_CASE("compile lines", "[command][classifier]") {
  const std::string line = GENERATE(as<std::string>{},
      "gcc -o f.o -c -Wall -Iinclude f.c",
      "gcc -o \"f.o\" -c -Wall \"f.c\"",          // SCons quotes some words
      "cc -c a.c",
      "g++ -c -o a.o a.cc",
      "c++ -c a.cc",
      "clang -c a.c",
      "clang++ -c a.cc",
      "/usr/bin/gcc -c a.c",
      "gcc-12 -c a.c",                            // versioned
      "clang++-14 -c a.cc",
      "x86_64-linux-gnu-gcc -c a.c",              // target prefix
      "x86_64-linux-gnu-g++-12 -c a.cc",
      "arm-none-eabi-gcc -mthumb -c a.c",
      "  gcc -c a.c",                             // leading blanks
      "CCACHE_DISABLE=1 gcc -c a.c",              // assignments before the program
      "\"/opt/my tools/gcc\" -c a.c",             // quoted program
      "gcc -DX='a b' -c a.c",
      "gcc -c a.c -o a.o && touch stamp",         // -c before the operator counts
      "gcc -c a.c > log 2>&1",                    // redirections are not its words
      "gcc -o a.o a.c 2>&1 -c");
  CAPTURE(line);
  CHECK(is_compile_line(line));
}

TEST_CASE("lines that are not compiles", "[command][classifier]") {
  const std::string line = GENERATE(as<std::string>{},
      "gcc -o prog prog.o -L. -lx",               // a link: no -c
      "gcc -o prog prog.c",                       // compile and link in one: no -c
      "ar rc libx.a a.o b.o",
      "ranlib libx.a",
      "ld -o x a.o",
      "gcc-ar rc libx.a a.o",                     // binutils wrapper, not a compiler
      "x86_64-linux-gnu-gcc-nm a.o",
      "cpp -c a.c",                               // the preprocessor
      "python3 gen.py -c config",
      "sh -c \"gcc -c a.c\"",
      "cd sub && gcc -c a.c",
      "gcc -o prog a.o && tool -c",               // -c after an operator is not gcc's
      "ccache gcc -c a.c",                        // a launcher already
      "distcc gcc -c a.c",
      "/usr/lib/distcc/gcc -c a.c",               // a masquerade link
      "/usr/lib/ccache/g++ -c a.cc",
      "$CC -c a.c",                               // an expansion: unknown program
      "`which gcc` -c a.c",
      "(gcc -c a.c)",
      "\"A\"=1 gcc -c a.c",                       // sh runs A=1 as the program
      "gcc a.c # -c",                             // a comment is no word
      "gcc a.c > -c",                             // a redirection's target is no word
      "",
      "   ",
      "gcc");
  CAPTURE(line);
  CHECK_FALSE(is_compile_line(line));
}

TEST_CASE("configured compilers", "[command][classifier]") {
  const CompileClassifier classifier({"icc", "foo-gcc", " nvcc ", ""});
  CHECK(is_compile_line("icc -c a.c", classifier));
  CHECK(is_compile_line("/opt/intel/bin/icc -c a.c", classifier));
  CHECK(is_compile_line("nvcc -c a.cu", classifier));
  CHECK(is_compile_line("foo-gcc -c a.c", classifier));
  CHECK_FALSE(is_compile_line("icc -c a.c"));
  CHECK_FALSE(is_compile_line("icc -o prog a.o", classifier));
}

TEST_CASE("a launcher goes before the compiler's word, after assignments", "[command][classifier]") {
  CHECK(prepared_line("gcc -c a.c").compiler_offset == 0);
  CHECK(prepared_line("  X=1 'g++' -c a.cc").compiler_offset == 6);
  CHECK(prepared_line("gcc -o p a.o").compiler_offset == std::string::npos);
}

TEST_CASE("an argv is a compile when its program is a compiler with -c", "[command][classifier]") {
  const CompileClassifier& classifier = CompileClassifier::default_compilers();
  CHECK(classifier.is_compile({"gcc", "-c", "a.c", "-o", "a.o"}));
  CHECK(classifier.is_compile({"/usr/bin/clang++-14", "-O2", "-c", "a.cc"}));
  CHECK_FALSE(classifier.is_compile({"gcc", "-o", "prog", "a.o"}));
  CHECK_FALSE(classifier.is_compile({"/usr/lib/ccache/gcc", "-c", "a.c"}));
  CHECK_FALSE(classifier.is_compile({}));
  Command command;
  command.argv = {"cc", "-c", "a.c"};
  command.env = std::vector<std::string>{};
  const PreparedCommand prepared = prepare_command(command);
  CHECK(prepared.compile);
  CHECK_FALSE(prepared.shell_line);
  CHECK(prepared.compiler_offset == std::string::npos);
}

}  // namespace
}  // namespace spawnpool::detail
