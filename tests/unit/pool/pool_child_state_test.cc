// The state a command starts in, whatever the driver did to its own: own process group,
// empty signal mask, default dispositions, stdin /dev/null, no fd beyond 2, and the
// resource limits the driver had when the pool started.
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "spawnpool/pool.h"
#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_support.h"

namespace spawnpool::test {
namespace {

// A driver that does what Python and build tools do to themselves: ignores SIGPIPE and
// SIGINT, blocks some signals, and leaks a descriptor without close-on-exec. Undone on
// destruction.
class UnfriendlyDriver {
 public:
  UnfriendlyDriver() {
    old_pipe_ = signal(SIGPIPE, SIG_IGN);
    old_int_ = signal(SIGINT, SIG_IGN);
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &block, &old_mask_);
    leaked_fd_ = open("/dev/null", O_RDONLY);  // inheritable on purpose
  }
  ~UnfriendlyDriver() {
    close(leaked_fd_);
    pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
    signal(SIGINT, old_int_);
    signal(SIGPIPE, old_pipe_);
  }
  UnfriendlyDriver(const UnfriendlyDriver&) = delete;
  UnfriendlyDriver& operator=(const UnfriendlyDriver&) = delete;

 private:
  sighandler_t old_pipe_, old_int_;
  sigset_t old_mask_;
  int leaked_fd_;
};

// Every limit child_state prints, as "soft:hard", read in this process.
std::map<std::string, std::string> my_limits() {
  const std::pair<const char*, int> limits[] = {
      {"AS", RLIMIT_AS},         {"CORE", RLIMIT_CORE},       {"CPU", RLIMIT_CPU},
      {"DATA", RLIMIT_DATA},     {"FSIZE", RLIMIT_FSIZE},     {"LOCKS", RLIMIT_LOCKS},
      {"MEMLOCK", RLIMIT_MEMLOCK}, {"MSGQUEUE", RLIMIT_MSGQUEUE}, {"NICE", RLIMIT_NICE},
      {"NOFILE", RLIMIT_NOFILE}, {"NPROC", RLIMIT_NPROC},     {"RSS", RLIMIT_RSS},
      {"RTPRIO", RLIMIT_RTPRIO}, {"RTTIME", RLIMIT_RTTIME},   {"SIGPENDING", RLIMIT_SIGPENDING},
      {"STACK", RLIMIT_STACK}};
  auto text = [](rlim_t v) { return v == RLIM_INFINITY ? std::string("inf") : std::to_string(v); };
  std::map<std::string, std::string> out;
  for (const auto& [name, resource] : limits) {
    rlimit rl{};
    getrlimit(resource, &rl);
    out["rlimit." + std::string(name)] = text(rl.rlim_cur) + ":" + text(rl.rlim_max);
  }
  return out;
}

TEST_CASE("a command starts in a clean state whatever the driver's", "[pool][child]") {
  // Both ways of keeping fds out of commands: close_range in the child, or (where the
  // kernel or seccomp refuses it) a spawner whose own fds are all close-on-exec.
  const bool close_range = GENERATE(true, false);
  const OutputMode mode = GENERATE(OutputMode::kCapture, OutputMode::kCaptureMerged);
  LeakCheck leaks;
  {
    UnfriendlyDriver driver;
    if (!close_range) setenv("SPAWNPOOL_DISABLE_CLOSE_RANGE", "1", 1);
    Pool pool(pool_options(1));
    unsetenv("SPAWNPOOL_DISABLE_CLOSE_RANGE");
    const std::vector<int> spawners = pool.spawner_pids();
    REQUIRE(spawners.size() == 1);

    const Result r = pool.run(helper_command("child_state", {}, mode));
    REQUIRE(r.returncode == 0);
    const auto state = parse_lines(r.stdout_data);
    INFO(r.stdout_data);
    CHECK(state.at("ppid") == std::to_string(spawners[0]));
    CHECK(state.at("pgid") == state.at("pid"));      // its own process group
    CHECK(state.at("sid") == std::to_string(getsid(0)));  // but the driver's session
    CHECK(state.at("blocked").empty());
    CHECK(state.at("ignored").empty());
    CHECK(state.at("handled").empty());
    CHECK(state.at("stdin") == "/dev/null");
    CHECK(state.at("fds") == "0,1,2");
    // Dies with its spawner, even one killed before it could publish the command's pid.
    CHECK(state.at("pdeathsig") == std::to_string(SIGKILL));
  }
  leaks.verify();
}

TEST_CASE("a command gets the resource limits the driver had at pool start", "[pool][child]") {
  LeakCheck leaks;
  {
    const auto at_start = my_limits();
    Pool pool(pool_options(1));
    // The driver lowers its own soft limits afterwards, as a driver tuning itself might.
    rlimit files{}, core{};
    getrlimit(RLIMIT_NOFILE, &files);
    getrlimit(RLIMIT_CORE, &core);
    const rlimit fewer_files{std::min<rlim_t>(files.rlim_cur, 256), files.rlim_max};
    const rlimit no_core{0, core.rlim_max};
    REQUIRE(setrlimit(RLIMIT_NOFILE, &fewer_files) == 0);
    REQUIRE(setrlimit(RLIMIT_CORE, &no_core) == 0);
    const Result r = pool.run(helper_command("child_state"));
    setrlimit(RLIMIT_NOFILE, &files);
    setrlimit(RLIMIT_CORE, &core);
    REQUIRE(r.returncode == 0);
    const auto state = parse_lines(r.stdout_data);
    for (const auto& [name, value] : at_start) {
      INFO(name);
      CHECK(state.at(name) == value);
    }
  }
  leaks.verify();
}

TEST_CASE("a passthrough command also starts with only fds 0 1 2", "[pool][child]") {
  LeakCheck leaks;
  {
    TempDir dir;
    Pool pool(pool_options(1));
    Command command = helper_command("child_state", {}, OutputMode::kPassthrough);
    // Passthrough output would land in the test log; send it to a file through a shell.
    command.argv = {"/bin/sh", "-c", "exec \"$0\" > \"$1\"", helper("child_state"),
                    dir / "state.txt"};
    REQUIRE(pool.run(command).returncode == 0);
    const auto state = parse_lines(read_file(dir / "state.txt"));
    CHECK(state.at("fds") == "0,1,2");
    CHECK(state.at("stdin") == "/dev/null");
    CHECK(state.at("pgid") == state.at("pid"));
  }
  leaks.verify();
}

}  // namespace
}  // namespace spawnpool::test
