// Which commands are C/C++ compiles (the compiler launcher's and the local slots' rule).
// A shell line is a compile when its program (the first word after any `VAR=value`
// words) is a C/C++ compiler and the words of its first simple command include `-c`; an
// argv likewise (its program is argv[0]). A compiler is one of the names (`cc gcc g++ c++
// clang clang++` and the configured extras), compared on the file name, also with a
// version suffix (`gcc-12`) or a target prefix (`x86_64-linux-gnu-gcc`). A compiler in a
// directory named like a launcher (/usr/lib/distcc/gcc) is its masquerade link and is left
// alone, as is a line that already starts with a launcher. A false positive costs little:
// distcc and ccache run what they cannot handle as it is. Immutable once made: thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "engine/src/command/shell_words.h"

namespace spawnpool::detail {

class CompileClassifier {
 public:
  /// The default compilers plus `extra_compilers` (blank entries are ignored, others
  /// trimmed).
  explicit CompileClassifier(const std::vector<std::string>& extra_compilers = {});

  /// Whether the program word (a name or a path) names a C/C++ compiler.
  bool is_compiler(std::string_view program) const;
  /// Where the compiler's word starts in the line of `tokens` if it is a compile (a
  /// launcher goes there), else std::string_view::npos.
  std::size_t compile_offset(std::string_view line, const std::vector<ShellToken>& tokens) const;
  /// Whether argv (not a shell line) is a compile.
  bool is_compile(const std::vector<std::string>& argv) const;

  /// The classifier with the default compilers only.
  static const CompileClassifier& default_compilers();

 private:
  bool is_name(std::string_view name) const;
  std::vector<std::string> names_;
};

}  // namespace spawnpool::detail
