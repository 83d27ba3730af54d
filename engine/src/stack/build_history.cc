// spawnpool::history_path (spawnpool/session.h): whether a build keeps the history of its
// commands and in which file, decided here for every front end.
#include <sys/stat.h>

#include <cstdlib>
#include <string>

#include "spawnpool/session.h"

namespace spawnpool {
namespace {

constexpr const char* kHistoryFile = "memory-history.sqlite";  // in a directory named

std::string trimmed_lower(const std::string& text) {
  const std::size_t first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) return {};
  std::string out = text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

// "~" and "~/..." start at $HOME, as a shell (and Python's expanduser) reads them.
std::string expand_home(const std::string& path) {
  const char* home = std::getenv("HOME");
  if (home == nullptr || path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/'))
    return path;
  return home + path.substr(1);
}

std::string joined(const std::string& dir, const std::string& name) {
  if (dir.empty() || name.front() == '/') return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::string history_path(const HistoryOptions& options,
                         const std::function<void(const std::string&)>& warn) {
  const bool off = trimmed_lower(options.setting) == "off";
  const bool read = options.memory || options.status_shown;  // what reads it
  if (!read) {
    // Named where nothing reads it: a setting the user will wonder about.
    if (!off && !options.setting.empty() && warn)
      warn(options.option_prefix + "history: only used with " + options.option_prefix +
           "memory or " + options.option_prefix + "status; ignored");
    return {};
  }
  const std::string& history = options.setting.empty() ? options.default_path : options.setting;
  if (off || history.empty()) return {};
  std::string path = joined(options.base_dir, expand_home(history));
  if (history.back() == '/' || is_directory(path)) path = joined(path, kHistoryFile);
  return path;
}

}  // namespace spawnpool
