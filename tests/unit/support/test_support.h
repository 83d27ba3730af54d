// What the pool tests share: where the helper programs and the spawner are, commands
// built from helpers, /proc readers, polling with generous deadlines, temporary
// directories. Header-only; each function is safe from any thread unless noted.
#pragma once

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "spawnpool/pool.h"

namespace spawnpool::test {

/// Absolute path of the helper program `name` (tests/helpers/NAME.cc).
inline std::string helper(const std::string& name) {
  return std::string(SPAWNPOOL_TEST_HELPER_DIR) + "/" + name;
}

/// Options for a pool of `slots` spawners built from this tree.
inline PoolOptions pool_options(std::size_t slots) {
  PoolOptions options;
  options.slots = slots;
  options.spawner_path = SPAWNPOOL_TEST_SPAWNER;
  return options;
}

/// A command running helper `name` with `args`, output captured unless told otherwise.
inline Command helper_command(const std::string& name, std::vector<std::string> args = {},
                              OutputMode output = OutputMode::kCapture) {
  Command command;
  command.argv.push_back(helper(name));
  for (auto& a : args) command.argv.push_back(std::move(a));
  command.output = output;
  return command;
}

/// Polls `done` every 10 ms until it holds or `timeout` passes; returns its last value.
inline bool wait_until(const std::function<bool()>& done,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

/// Fields of /proc/PID/stat that the tests use; state 0 when the process is gone.
struct ProcStat {
  char state = 0;
  int ppid = 0;
  int pgrp = 0;
};

inline ProcStat proc_stat(int pid) {
  const std::string text = read_file("/proc/" + std::to_string(pid) + "/stat");
  ProcStat st;
  const auto paren = text.rfind(')');  // the command name may hold spaces and parens
  if (paren == std::string::npos) return st;
  std::istringstream rest(text.substr(paren + 1));
  rest >> st.state >> st.ppid >> st.pgrp;
  return st;
}

/// Whether `pid` is gone or a zombie waiting for its (new) parent to reap it.
inline bool process_gone(int pid) {
  const char state = proc_stat(pid).state;
  return state == 0 || state == 'Z' || state == 'X';
}

/// Every live process whose parent is `parent`.
inline std::vector<int> children_of(int parent) {
  std::vector<int> out;
  if (DIR* dir = opendir("/proc")) {
    while (dirent* entry = readdir(dir)) {
      const int pid = std::atoi(entry->d_name);
      if (pid <= 0) continue;
      const ProcStat st = proc_stat(pid);
      if (st.ppid == parent && st.state != 0 && st.state != 'Z') out.push_back(pid);
    }
    closedir(dir);
  }
  return out;
}

/// The basename of the program `pid` runs ("" when gone).
inline std::string exe_name(int pid) {
  char buffer[PATH_MAX];
  const std::string link = "/proc/" + std::to_string(pid) + "/exe";
  const ssize_t n = readlink(link.c_str(), buffer, sizeof buffer);
  if (n <= 0) return "";
  return std::filesystem::path(std::string(buffer, static_cast<std::size_t>(n)))
      .filename()
      .string();
}

/// Waits until spawner `spawner_pid` runs helper `name` (exec done) and returns its pid,
/// or -1 after 10 s. Then waits 200 ms more, so that the spawner has surely recorded the
/// command's pid (just after the clone returns) before the test acts on the command.
inline int command_of(int spawner_pid, const std::string& name) {
  int found = -1;
  wait_until([&] {
    for (int pid : children_of(spawner_pid))
      if (exe_name(pid) == name) found = pid;
    return found > 0;
  });
  if (found > 0) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return found;
}

/// A command's "key=value" lines as a map (child_state's output).
inline std::map<std::string, std::string> parse_lines(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

/// Splits `text` at NUL bytes (print_env's output); a trailing NUL ends the last entry.
inline std::vector<std::string> split_nul(const std::string& text) {
  std::vector<std::string> out;
  std::size_t begin = 0;
  for (std::size_t end; (end = text.find('\0', begin)) != std::string::npos; begin = end + 1)
    out.push_back(text.substr(begin, end - begin));
  if (begin < text.size()) out.push_back(text.substr(begin));
  return out;
}

/// A fresh directory under $TMPDIR or /tmp, removed with its contents on destruction.
/// Not thread-safe.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/spawnpool-test.XXXXXX";
    if (mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = templ;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace spawnpool::test
