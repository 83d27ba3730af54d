// A small kernel text file (/proc/meminfo, a PSI file, a cgroup value) read whole again
// and again through one descriptor kept open, so each reading is one pread. Not
// thread-safe: one owner calls read().
#pragma once

#include <optional>
#include <string>

namespace spawnpool::detail {

class ProcFile {
 public:
  explicit ProcFile(std::string path) : path_(std::move(path)) {}
  ~ProcFile();
  ProcFile(const ProcFile&) = delete;
  ProcFile& operator=(const ProcFile&) = delete;

  /// The file's whole content now; unset when it cannot be opened or read (a file that
  /// does not exist yet is tried again on the next call).
  std::optional<std::string> read();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace spawnpool::detail
