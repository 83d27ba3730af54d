// The evaluation of Boost.Process v2 (Boost 1.81, header-only) for starting spawners
// (issue 13), against the engine's posix_spawn (engine/src/spawners/spawner_process.cc). Not a
// ctest test: built with -DSPAWNPOOL_BOOST_PROCESS_EVAL=ON, run by hand:
//
//   spawner_launch_eval SPAWNER CHILD_STATE [REPEATS]
//
// 1. What a launched program gets, from a driver with Python-like dirt (SIGPIPE ignored,
//    SIGUSR2 handled, SIGUSR1 blocked, an fd without close-on-exec): each launcher starts
//    tests/helpers/child_state in the spawner's place (fds 3 and 4 bound as a spawner's).
// 2. An exec failure with an atexit() handler registered in the driver.
// 3. Pool start-up: a segment of N slots, N spawners launched, the name unlinked, each
//    attached (kIdle), for N = 8, 64, 256; launchers interleaved, medians of REPEATS
//    (default 9). Closing them is not timed.
// Single-threaded. docs/architecture.md ("Choices and why") has the result.
#define BOOST_PROCESS_USE_STD_FS 1
// Boost 1.81's v2 with std::filesystem lacks two declarations (boostorg/process #280,
// #287): boost::optional's header, and boost::decay inside its namespace.
#include <boost/optional.hpp>
#include <boost/type_traits/decay.hpp>
namespace boost::process::v2 {
using boost::decay;
}
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/process/v2/posix/bind_fd.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/posix/vfork_launcher.hpp>
#include <boost/process/v2/stdio.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/src/spawners/segment.h"
#include "engine/src/spawners/spawner_process.h"
#include "worker_pool/protocol/futex.h"
#include "worker_pool/protocol/protocol.h"

extern char** environ;

namespace {

namespace bp = boost::process::v2;
namespace fs = std::filesystem;
using spawnpool::detail::SpawnerProcess;

// What the project needs of a launch and the vfork launcher does not do: no signal
// handler may run in the child (signals blocked around the vfork), dispositions back to
// default and an empty mask before exec, and _exit() instead of Boost's exit() after a
// failed exec (which would run the driver's atexit handlers and flush its stdio in the
// driver's own memory). Boost 1.81 detects on_error/on_exec_error hooks with a
// five-argument call but makes a four-argument one, hence both overloads of each.
struct SpawnerSignals {
  sigset_t saved{};
  bp::error_code on_setup(bp::posix::default_launcher&, const fs::path&, const char* const*) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    return {};
  }
  bp::error_code on_exec_setup(bp::posix::default_launcher&, const fs::path&,
                               const char* const*) {
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG; ++sig) sigaction(sig, &default_action, nullptr);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    return {};
  }
  void on_exec_error(bp::posix::default_launcher&, const fs::path&, const char* const*,
                     const bp::error_code&) {
    _exit(127);
  }
  void on_exec_error(bp::posix::default_launcher&, const bp::error_code&, const fs::path&,
                     const char* const*, const bp::error_code&) {}
  void on_success(bp::posix::default_launcher&, const fs::path&, const char* const*) {
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }
  void on_error(bp::posix::default_launcher&, const fs::path&, const char* const*,
                const bp::error_code&) {
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }
  void on_error(bp::posix::default_launcher&, const bp::error_code&, const fs::path&,
                const char* const*, const bp::error_code&) {}
};

// posix::bind_fd, with the return statement its on_setup() lacks in Boost 1.81 (flowing
// off the end of it is undefined behaviour; with -O2 this program crashed in the caller).
struct BindFd {
  int target;
  int fd;
  bp::error_code on_setup(bp::posix::default_launcher& launcher, const fs::path&,
                          const char* const*) {
    launcher.fd_whitelist.push_back(target);
    return {};
  }
  bp::error_code on_exec_setup(bp::posix::default_launcher&, const fs::path&,
                               const char* const*) {
    return ::dup2(fd, target) == -1 ? bp::error_code(errno, bp::system_category())
                                    : bp::error_code();
  }
};

// The socketpair and descriptor placement of engine/src/spawners/spawner_process.cc.
struct Lifeline {
  int driver_end = -1;
  int child_end = -1;
  Lifeline() {
    int sockets[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) std::abort();
    driver_end = sockets[0];
    child_end = fcntl(sockets[1], F_DUPFD_CLOEXEC, spawnpool::protocol::kLifelineFd + 1);
    close(sockets[1]);
  }
};

// The spawner started through Boost.Process v2's vfork launcher; `with_fixes`: with
// SpawnerSignals (without it, the stock launcher).
SpawnerProcess boost_launch(const std::string& path, int segment_fd, std::uint32_t slot,
                            bool with_fixes) {
  Lifeline lifeline;
  boost::asio::io_context context;  // per launch: notify_fork() rewrites its services
  bp::posix::vfork_launcher launcher;
  bp::error_code ec;
  const std::vector<std::string> args{std::to_string(slot)};
  bp::process_stdio stdio{nullptr, {}, {}};
  BindFd segment{spawnpool::protocol::kSegmentFd, segment_fd};
  BindFd life{spawnpool::protocol::kLifelineFd, lifeline.child_end};
  SpawnerProcess spawner;
  auto start = [&](auto&&... fixes) {
    // The executor overload: the (context, error_code&) one forgets the error_code and
    // throws (Boost 1.81 vfork_launcher.hpp:49).
    auto process =
        launcher(context.get_executor(), ec, path, args, stdio, segment, life, fixes...);
    spawner.pid = ec ? -1 : process.detach().id();
  };
  if (with_fixes) {
    SpawnerSignals signals;
    start(signals);
  } else {
    start();
  }
  close(lifeline.child_end);
  if (spawner.pid < 0) {
    close(lifeline.driver_end);
    std::fprintf(stderr, "boost launch of %s: %s\n", path.c_str(), ec.message().c_str());
    return spawner;
  }
  spawner.lifeline_fd = lifeline.driver_end;
  spawner.pidfd = static_cast<int>(syscall(SYS_pidfd_open, spawner.pid, 0));
  return spawner;
}

using Launch = std::function<SpawnerProcess(const std::string&, int, std::uint32_t)>;

std::map<std::string, Launch> launchers() {
  return {
      {"posix_spawn", [](const std::string& p, int fd, std::uint32_t slot) {
         return spawnpool::detail::launch_spawner(p, fd, slot, "");
       }},
      {"boost_vfork", [](const std::string& p, int fd, std::uint32_t slot) {
         return boost_launch(p, fd, slot, false);
       }},
      {"boost_vfork_fixed", [](const std::string& p, int fd, std::uint32_t slot) {
         return boost_launch(p, fd, slot, true);
       }},
  };
}

void reap(SpawnerProcess& spawner) {
  spawnpool::detail::release_spawner(spawner);
  if (spawner.pid > 0)
    while (waitpid(spawner.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
}

void ignore_handler(int) {}

// Runs `launch` on child_state with the driver's stdout redirected into a pipe.
std::string launched_state(const Launch& launch, const std::string& child_state) {
  spawnpool::detail::Segment segment(1, 4096, 4096);
  int out[2];
  if (pipe(out) != 0) std::abort();
  const int saved_stdout = dup(1);
  dup2(out[1], 1);
  close(out[1]);
  SpawnerProcess process = launch(child_state, segment.fd(), 0);
  dup2(saved_stdout, 1);
  close(saved_stdout);
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  close(out[0]);
  reap(process);
  std::string picked;
  for (const char* key : {"fds=", "blocked=", "ignored=", "handled="}) {
    const auto at = text.find(std::string("\n") + key);
    picked += " " + (at == std::string::npos
                         ? std::string(key) + "?"
                         : text.substr(at + 1, text.find('\n', at + 1) - at - 1));
  }
  return picked;
}

void report_guarantees(const std::string& child_state) {
  struct sigaction ignore {}, handle {};
  ignore.sa_handler = SIG_IGN;
  handle.sa_handler = ignore_handler;
  sigaction(SIGPIPE, &ignore, nullptr);
  sigaction(SIGUSR2, &handle, nullptr);
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, nullptr);
  const int leaked = open("/dev/null", O_RDONLY);  // no O_CLOEXEC, as a careless driver's
  std::printf("what the launched program gets (want fds=0,1,2,3,4 and no signal listed):\n");
  for (const auto& [name, launch] : launchers())
    std::printf("  %-18s%s\n", name.c_str(), launched_state(launch, child_state).c_str());
  close(leaked);
  sigprocmask(SIG_UNBLOCK, &usr1, nullptr);
  signal(SIGPIPE, SIG_DFL);
  signal(SIGUSR2, SIG_DFL);
}

const pid_t g_driver_pid = getpid();

void driver_atexit() {
  std::fprintf(stderr, "    the driver's atexit handler ran in pid %d (the driver is %d)\n",
               static_cast<int>(getpid()), static_cast<int>(g_driver_pid));
}

void report_exec_failure() {
  std::printf("exec failure (missing program) with an atexit handler in the driver:\n");
  std::fflush(stdout);
  std::atexit(driver_atexit);
  spawnpool::detail::Segment segment(1, 4096, 4096);
  for (bool fixed : {false, true}) {
    std::fprintf(stderr, "  boost_vfork%s:\n", fixed ? "_fixed" : "");
    SpawnerProcess p = boost_launch("/nonexistent/spawnpool-spawner", segment.fd(), 0, fixed);
    reap(p);
  }
}

double ms_since(std::chrono::steady_clock::time_point begin) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin)
      .count();
}

struct Startup {
  double launches_ms;  // the launch calls alone
  double total_ms;     // segment, launches, every spawner attached
};

Startup startup(const Launch& launch, const std::string& spawner, std::uint32_t slots) {
  const auto begin = std::chrono::steady_clock::now();
  spawnpool::detail::Segment segment(slots, 1 << 20, 1 << 20);
  std::vector<SpawnerProcess> spawners;
  double launches_ms = 0;
  for (std::uint32_t i = 0; i < slots; ++i) {
    segment.slot(i).control->state.store(spawnpool::protocol::kStarting);
    const auto launch_begin = std::chrono::steady_clock::now();
    spawners.push_back(launch(spawner, segment.fd(), i));
    launches_ms += ms_since(launch_begin);
  }
  for (std::uint32_t i = 0; i < slots; ++i) {
    auto& state = segment.slot(i).control->state;
    while (state.load() == spawnpool::protocol::kStarting)
      spawnpool::detail::futex_wait(state, spawnpool::protocol::kStarting, 20);
  }
  const Startup result{launches_ms, ms_since(begin)};
  for (auto& s : spawners) reap(s);
  return result;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void report_startup(const std::string& spawner, int repeats) {
  std::printf("pool start-up, ms (median of %d, interleaved): all attached / launch calls\n",
              repeats);
  std::printf("  %6s %22s %22s %14s\n", "slots", "posix_spawn", "boost_vfork_fixed",
              "ratio");
  const Launch posix = launchers().at("posix_spawn");
  const Launch boost = launchers().at("boost_vfork_fixed");
  for (std::uint32_t slots : {8u, 64u, 256u}) {
    std::vector<double> a_total, a_launch, b_total, b_launch;
    for (int r = 0; r < repeats; ++r) {
      for (int which = 0; which < 2; ++which) {
        const bool posix_now = (which == 0) == (r % 2 == 0);
        const Startup s = startup(posix_now ? posix : boost, spawner, slots);
        (posix_now ? a_total : b_total).push_back(s.total_ms);
        (posix_now ? a_launch : b_launch).push_back(s.launches_ms);
      }
    }
    std::printf("  %6u %12.1f / %7.2f %12.1f / %7.2f %6.2fx / %4.2fx\n", slots,
                median(a_total), median(a_launch), median(b_total), median(b_launch),
                median(b_total) / median(a_total), median(b_launch) / median(a_launch));
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SPAWNER CHILD_STATE [REPEATS]\n", argv[0]);
    return 2;
  }
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 9;
  report_guarantees(argv[2]);
  report_startup(argv[1], repeats);
  std::fflush(stdout);
  report_exec_failure();
  return 0;
}
