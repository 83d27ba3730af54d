// Which jobserver MAKEFLAGS names: GNU make's three spellings, parsed as make parses them
// (the last jobserver option wins; words after "--" are variable assignments). A pure
// function; no threading concerns.
#pragma once

#include <string>
#include <string_view>

namespace spawnpool::detail {

struct JobserverAuth {
  enum class Style { kNone, kPipe, kFifo, kInvalid };
  Style style = Style::kNone;
  int read_fd = -1, write_fd = -1;  ///< kPipe: make's R,W
  std::string text;                 ///< kFifo: the path; kInvalid: the option's value
};

/// --jobserver-auth=fifo:PATH (make 4.4), --jobserver-auth=R,W (4.2, 4.3),
/// --jobserver-fds=R,W (3.78 to 4.1). make 4.2's "-2,-2" (no jobserver) is kInvalid.
JobserverAuth parse_makeflags(std::string_view makeflags);

}  // namespace spawnpool::detail
