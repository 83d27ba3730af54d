#include "worker_pool/spawner/path_search.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace spawnpool::detail {
namespace {

const char* find_env(char* const* envp, const char* name) {
  const std::size_t n = std::strlen(name);
  for (; *envp; ++envp)
    if (std::strncmp(*envp, name, n) == 0 && (*envp)[n] == '=') return *envp + n + 1;
  return nullptr;
}

// Resolves `path` as the child will see it: relative paths are relative to its cwd.
std::string as_seen_from(const char* cwd, const std::string& path) {
  if (path[0] == '/' || cwd == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

}  // namespace

std::string search_path(const char* name, char* const* envp, const char* cwd,
                        int& error_number) {
  if (std::strchr(name, '/')) return name;
  const char* path = find_env(envp, "PATH");
  if (path == nullptr) path = "/bin:/usr/bin";  // confstr(_CS_PATH) on glibc
  error_number = ENOENT;
  for (const char* dir = path;; ++dir) {
    const char* end = std::strchr(dir, ':');
    if (end == nullptr) end = dir + std::strlen(dir);
    std::string candidate(dir, end);
    candidate = candidate.empty() ? name : candidate + "/" + name;
    struct stat st;
    const std::string seen = as_seen_from(cwd, candidate);
    if (stat(seen.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode) && faccessat(AT_FDCWD, seen.c_str(), X_OK, AT_EACCESS) == 0)
        return candidate;
      error_number = EACCES;  // exists but cannot run: keep looking, as execvp does
    } else if (errno == EACCES) {
      error_number = EACCES;
    }
    if (*end == '\0') return "";
    dir = end;
  }
}

}  // namespace spawnpool::detail
