#include "engine/src/jobserver/makeflags.h"

#include <charconv>

namespace spawnpool::detail {
namespace {

bool parse_fd(std::string_view text, int& fd) {
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, fd);
  return error == std::errc() && at == end && fd >= 0;
}

JobserverAuth auth_from(std::string_view value) {
  JobserverAuth auth;
  auth.text = std::string(value);
  constexpr std::string_view kFifo = "fifo:";
  if (value.substr(0, kFifo.size()) == kFifo) {
    auth.text = std::string(value.substr(kFifo.size()));
    auth.style = auth.text.empty() ? JobserverAuth::Style::kInvalid : JobserverAuth::Style::kFifo;
    if (auth.text.empty()) auth.text = std::string(value);
    return auth;
  }
  const std::size_t comma = value.find(',');
  if (comma != std::string_view::npos && parse_fd(value.substr(0, comma), auth.read_fd) &&
      parse_fd(value.substr(comma + 1), auth.write_fd)) {
    auth.style = JobserverAuth::Style::kPipe;
    return auth;
  }
  auth.style = JobserverAuth::Style::kInvalid;
  return auth;
}

}  // namespace

JobserverAuth parse_makeflags(std::string_view makeflags) {
  constexpr std::string_view kOptions[] = {"--jobserver-auth=", "--jobserver-fds="};
  std::string_view found;
  bool any = false;
  std::size_t at = 0;
  while (at < makeflags.size()) {
    const std::size_t start = makeflags.find_first_not_of(" \t\n", at);
    if (start == std::string_view::npos) break;
    std::size_t end = makeflags.find_first_of(" \t\n", start);
    if (end == std::string_view::npos) end = makeflags.size();
    const std::string_view word = makeflags.substr(start, end - start);
    at = end;
    if (word == "--") break;
    for (const std::string_view option : kOptions)
      if (word.substr(0, option.size()) == option) {
        found = word.substr(option.size());
        any = true;
      }
  }
  return any ? auth_from(found) : JobserverAuth{};
}

}  // namespace spawnpool::detail
