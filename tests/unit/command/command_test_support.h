// What the command tests share: a fake inner layer that records what reaches it, the
// engine's layer that runs commands on a real Pool, running a program directly (dash
// itself, to compare with), capturing this process's fd 1 or 2, and print_argv's output
// read back.
// Header-only; not thread-safe unless noted.
#pragma once

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "engine/src/stack/layer.h"
#include "engine/src/stack/pool_layer.h"
#include "spawnpool/pool.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {

/// The bottom of a test stack: records each command as it arrives and answers with
/// `answer` (default: a command that ran and exited 0). Thread-safe.
class FakeLayer : public detail::Layer {
 public:
  using Answer = std::function<Result(detail::PreparedCommand&)>;
  explicit FakeLayer(Answer answer = {}) : answer_(std::move(answer)) {}

  Result run(detail::PreparedCommand& command) override {
    {
      const std::lock_guard<std::mutex> hold(lock_);
      seen_.push_back(command);
    }
    if (answer_) return answer_(command);
    Result ok;
    ok.returncode = 0;
    ok.captured = command.command.output != OutputMode::kPassthrough;
    return ok;
  }
  std::vector<detail::PreparedCommand> seen() const {
    const std::lock_guard<std::mutex> hold(lock_);
    return seen_;
  }

 private:
  Answer answer_;
  mutable std::mutex lock_;
  std::vector<detail::PreparedCommand> seen_;
};

/// The bottom layer on a real pool: the engine's own (pool_layer.h).
using detail::PoolLayer;

/// `sh -c line` in / with `env` (a launcher's tests: its PATH finds the compilers).
inline Command sh_line(const std::string& line, std::vector<std::string> env,
                       OutputMode output) {
  Command command;
  command.argv = {"sh", "-c", line};
  command.env = std::move(env);
  command.cwd = "/";
  command.output = output;
  return command;
}

/// Writes an executable script (a fake launcher or compiler) at `path`.
inline void write_script(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
  chmod(path.c_str(), 0755);
}

/// A Result of a command that ran and ended with `returncode` (-N: signal N).
inline Result ran(int returncode, std::string out = {}, std::string err = {}) {
  Result r;
  r.returncode = returncode;
  r.captured = true;
  r.stdout_data = std::move(out);
  r.stderr_data = std::move(err);
  return r;
}

/// A Result of a command whose launch failed at `stage`.
inline Result not_started(FailureStage stage, int error_number) {
  Result r;
  r.failure = stage;
  r.error_number = error_number;
  r.error_message = "cannot execute";
  return r;
}

/// How a program run directly ended: its exit status (-N: signal N) and output.
struct Outcome {
  int status = -1;
  std::string out;
  std::string err;
  bool operator==(const Outcome& o) const {
    return status == o.status && out == o.out && err == o.err;
  }
};

/// Runs `program` with `argv` in `cwd` with `env`, output to temporary files, and waits
/// for it: no shell, no pool. Outcome::status -1 when it could not be started.
inline Outcome run_directly(const std::string& program, const std::vector<std::string>& argv,
                            const std::vector<std::string>& env, const std::string& cwd) {
  TempDir dir;
  const std::string out_path = dir / "out", err_path = dir / "err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT, 0600);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<char*> args, envp;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int failed =
      posix_spawn(&pid, program.c_str(), &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  Outcome outcome;
  if (failed) return outcome;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  outcome.status = WIFSIGNALED(status) ? -WTERMSIG(status) : WEXITSTATUS(status);
  outcome.out = read_file(out_path);
  outcome.err = read_file(err_path);
  return outcome;
}

/// What `sh -c line` (/bin/sh) does in `cwd` with `env`.
inline Outcome sh_outcome(const std::string& line, const std::vector<std::string>& env,
                          const std::string& cwd) {
  return run_directly("/bin/sh", {"sh", "-c", line}, env, cwd);
}

/// print_argv's output: its arguments after argv[0], and its environment by name.
struct PrintedArgv {
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  bool operator==(const PrintedArgv& o) const { return args == o.args && env == o.env; }
};

inline std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2)
    bytes += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  return bytes;
}

inline PrintedArgv parse_print_argv(const std::string& out) {
  PrintedArgv printed;
  std::size_t begin = 0;
  for (std::size_t end; (end = out.find('\n', begin)) != std::string::npos; begin = end + 1) {
    const std::string line = out.substr(begin, end - begin);
    if (line.size() < 2) continue;
    const std::string text = from_hex(line.substr(2));
    if (line[0] == 'a') {
      printed.args.push_back(text);
    } else {
      const std::size_t eq = text.find('=');
      printed.env[text.substr(0, eq)] = eq == std::string::npos ? "" : text.substr(eq + 1);
    }
  }
  return printed;
}

/// An environment in which the test helpers (print_argv, exit_as) are found on PATH.
inline std::vector<std::string> helper_env(std::vector<std::string> extra = {}) {
  std::vector<std::string> env = {"PATH=" + std::string(SPAWNPOOL_TEST_HELPER_DIR) +
                                      ":/usr/bin:/bin",
                                  "LC_ALL=C"};
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

/// Whether dash is installed where the comparisons run it (/bin/sh is dash on Debian).
inline bool have_dash() { return access("/bin/dash", X_OK) == 0; }

/// Points this process's `fd` at a temporary file for its lifetime; text() reads what was
/// written to it so far.
class CapturedFd {
 public:
  explicit CapturedFd(int fd) : fd_(fd), saved_(dup(fd)) {
    const int file = open((dir_ / "captured").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(file, fd_);
    close(file);
  }
  ~CapturedFd() {
    dup2(saved_, fd_);
    close(saved_);
  }
  CapturedFd(const CapturedFd&) = delete;
  CapturedFd& operator=(const CapturedFd&) = delete;
  std::string text() const { return read_file(dir_ / "captured"); }

 private:
  TempDir dir_;
  int fd_;
  int saved_;
};

}  // namespace spawnpool::test
