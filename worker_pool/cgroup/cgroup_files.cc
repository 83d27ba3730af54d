#include "worker_pool/cgroup/cgroup_files.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace spawnpool::detail {
namespace {

// Parses a decimal (optionally negative) or "max" at the start of `text`.
bool parse_int64(std::string_view text, std::int64_t& value) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  if (text == "max") {
    value = kNoLimit;
    return true;
  }
  const bool negative = !text.empty() && text[0] == '-';
  if (negative) text.remove_prefix(1);
  if (text.empty() || text.size() > 19) return false;
  std::uint64_t parsed = 0;  // 19 digits fit; the check below keeps it an int64
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    parsed = parsed * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (parsed > static_cast<std::uint64_t>(INT64_MAX)) return false;
  value = negative ? -static_cast<std::int64_t>(parsed) : static_cast<std::int64_t>(parsed);
  return true;
}

ssize_t pread_retrying(int fd, char* buffer, std::size_t size, off_t offset) {
  ssize_t n;
  do n = pread(fd, buffer, size, offset);
  while (n < 0 && errno == EINTR);
  return n;
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

int open_at(int dir_fd, const char* name, int flags) {
  int fd;
  do fd = openat(dir_fd, name, flags | O_CLOEXEC);
  while (fd < 0 && errno == EINTR);
  return fd;
}

bool read_int64(int fd, std::int64_t& value) {
  char buffer[32];
  const ssize_t n = pread_retrying(fd, buffer, sizeof buffer, 0);
  if (n < 0) return false;
  if (!parse_int64(std::string_view(buffer, static_cast<std::size_t>(n)), value)) {
    errno = EPROTO;
    return false;
  }
  return true;
}

bool find_keyed_value(std::string_view text, std::string_view key, std::int64_t& value) {
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(at, end - at);
    if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
        line[key.size()] == ' ')
      return parse_int64(line.substr(key.size() + 1), value);
    at = end + 1;
  }
  return false;
}

bool read_keyed_value(int fd, std::string_view key, std::int64_t& value) {
  char buffer[4096];
  const ssize_t n = pread_retrying(fd, buffer, sizeof buffer, 0);
  if (n < 0) return false;
  if (!find_keyed_value(std::string_view(buffer, static_cast<std::size_t>(n)), key, value)) {
    errno = EPROTO;
    return false;
  }
  return true;
}

bool write_text(int fd, std::string_view text) {
  ssize_t n;
  do n = pwrite(fd, text.data(), text.size(), 0);
  while (n < 0 && errno == EINTR);
  if (n < 0) return false;
  if (static_cast<std::size_t>(n) != text.size()) {
    errno = EIO;
    return false;
  }
  return true;
}

bool read_all(int fd, std::string& out) {
  out.clear();
  for (;;) {
    const std::size_t old_size = out.size();
    out.resize(old_size + 4096);
    const ssize_t n = pread_retrying(fd, &out[old_size], 4096, static_cast<off_t>(old_size));
    if (n < 0) {
      out.resize(old_size);
      return false;
    }
    out.resize(old_size + static_cast<std::size_t>(n));
    if (n == 0) return true;
  }
}

bool lists_controller(std::string_view list, std::string_view controller,
                      std::string_view separators) {
  std::size_t at = 0;
  while (at < list.size()) {
    const std::size_t end = std::min(list.find_first_of(separators, at), list.size());
    if (list.substr(at, end - at) == controller) return true;
    at = end + 1;
  }
  return false;
}

bool read_file_text(const std::string& path, std::string& out) {
  return with_file_at(AT_FDCWD, path.c_str(), O_RDONLY,
                      [&](int fd) { return read_all(fd, out); });
}

bool write_file_text(const std::string& path, std::string_view text) {
  return with_file_at(AT_FDCWD, path.c_str(), O_WRONLY,
                      [&](int fd) { return write_text(fd, text); });
}

std::vector<pid_t> parse_pid_list(std::string_view text) {
  std::vector<pid_t> pids;
  for (std::size_t at = 0; at < text.size();) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::int64_t pid = 0;
    if (parse_int64(text.substr(at, end - at), pid) && pid > 0)
      pids.push_back(static_cast<pid_t>(pid));
    at = end + 1;
  }
  return pids;
}

CgroupVersion cgroup_version_of(const std::string& dir) {
  struct statfs fs {};
  if (statfs(dir.c_str(), &fs) != 0) return CgroupVersion::kNone;
  if (fs.f_type == CGROUP2_SUPER_MAGIC) return CgroupVersion::kV2;
  if (fs.f_type == CGROUP_SUPER_MAGIC) return CgroupVersion::kV1;
  return CgroupVersion::kNone;
}

std::vector<std::string> subdirectories(int dir_fd, const std::string& prefix) {
  std::vector<std::string> names;
  const int listing_fd = open_at(dir_fd, ".", O_RDONLY | O_DIRECTORY);
  DIR* dir = listing_fd >= 0 ? fdopendir(listing_fd) : nullptr;
  if (dir == nullptr) {
    if (listing_fd >= 0) close(listing_fd);
    return names;
  }
  while (dirent* entry = readdir(dir)) {
    const std::string name = entry->d_name;
    if (entry->d_type == DT_DIR && name != "." && name != ".." && starts_with(name, prefix))
      names.push_back(name);
  }
  closedir(dir);
  return names;
}

}  // namespace spawnpool::detail
