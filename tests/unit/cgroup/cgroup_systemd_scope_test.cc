// The delegated-scope request (cgroup_systemd_scope.h) against a private dbus-daemon on
// which a fake systemd manager (this test's thread, through sd-bus) takes
// org.freedesktop.systemd1: what arrives is the call's arguments as systemd would see
// them. The real manager moves the process into the scope; the fake cannot, so the
// request ends with "did not move this process", which is also checked. And with the
// user bus pointing nowhere, start_delegated_scope() says so and returns false.
#include "worker_pool/cgroup/cgroup_systemd_scope.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <catch2/catch.hpp>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/support/leak_check.h"
#include "tests/unit/support/test_skip.h"
#include "tests/unit/support/test_support.h"

extern char** environ;

namespace spawnpool::test {
namespace {

using detail::DelegatedScopeRequest;

// Sets an environment variable for one test, and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value != nullptr) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) setenv(name_, old_.c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// Whether a whole line arrives on `fd` within `limit` (poll: the daemon may never write).
bool printed_a_line(int fd, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  char c = 0;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        end - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) return false;
    const ssize_t n = read(fd, &c, 1);
    if (n <= 0) return false;  // the daemon exited before it listened
    if (c == '\n') return true;
  }
}

// A dbus-daemon of this test's own, on a socket in a temporary directory; killed by pid
// and reaped at the end. Ready once it prints its address (--print-address): it does
// that after listen(), whereas the socket file exists from bind() on, and a connect in
// between is refused (the fake manager then failed to start under a loaded ctest -j2).
class PrivateBus {
 public:
  explicit PrivateBus(const std::string& dir) {
    address_ = "unix:path=" + dir + "/bus";
    const std::string listen = "--address=" + address_;
    int out[2];
    if (pipe2(out, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    const char* argv[] = {"dbus-daemon", "--session", "--nofork", "--nopidfile",
                          "--print-address=1", listen.c_str(), nullptr};
    if (posix_spawnp(&pid_, "dbus-daemon", &actions, nullptr, const_cast<char**>(argv),
                     environ) != 0)
      pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    close(out[1]);
    ready_ = pid_ > 0 && printed_a_line(out[0], std::chrono::seconds(10));
    close(out[0]);
  }
  ~PrivateBus() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    waitpid(pid_, nullptr, 0);
  }
  bool ready() const { return ready_; }
  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  bool ready_ = false;
  std::string address_;
};

struct ReceivedCall {
  std::string name, mode, description, collect_mode;
  int delegate = -1;
  std::vector<std::uint32_t> pids;
  int properties = 0;
  int aux_units = -1;
};

int read_property(sd_bus_message* m, ReceivedCall& call) {
  const char* key = nullptr;
  int r = sd_bus_message_read(m, "s", &key);
  if (r < 0) return r;
  ++call.properties;
  const std::string name = key;
  if (name == "Description" || name == "CollectMode") {
    const char* text = nullptr;
    r = sd_bus_message_read(m, "v", "s", &text);
    (name == "Description" ? call.description : call.collect_mode) = text != nullptr ? text : "";
  } else if (name == "Delegate") {
    r = sd_bus_message_read(m, "v", "b", &call.delegate);
  } else if (name == "PIDs") {
    if ((r = sd_bus_message_enter_container(m, 'v', "au")) < 0) return r;
    if ((r = sd_bus_message_enter_container(m, 'a', "u")) < 0) return r;
    std::uint32_t pid = 0;
    while ((r = sd_bus_message_read(m, "u", &pid)) > 0) call.pids.push_back(pid);
    if (r < 0) return r;
    if ((r = sd_bus_message_exit_container(m)) < 0) return r;
    r = sd_bus_message_exit_container(m);
  } else {
    r = sd_bus_message_skip(m, "v");
  }
  return r;
}

// StartTransientUnit(s name, s mode, a(sv) properties, a(sa(sv)) aux) -> o job; then
// JobRemoved(u, o, s, s) with `result`, as systemd sends it when the job ends.
struct FakeManager {
  ReceivedCall call;
  std::string result = "done";
  std::atomic<bool> called{false};

  static int start_transient_unit(sd_bus_message* m, void* data, sd_bus_error*) {
    auto& self = *static_cast<FakeManager*>(data);
    const char *name = nullptr, *mode = nullptr;
    int r = sd_bus_message_read(m, "ss", &name, &mode);
    if (r < 0) return r;
    self.call.name = name;
    self.call.mode = mode;
    if ((r = sd_bus_message_enter_container(m, 'a', "(sv)")) < 0) return r;
    while ((r = sd_bus_message_enter_container(m, 'r', "sv")) > 0) {
      if ((r = read_property(m, self.call)) < 0) return r;
      if ((r = sd_bus_message_exit_container(m)) < 0) return r;
    }
    if (r < 0 || (r = sd_bus_message_exit_container(m)) < 0) return r;
    if ((r = sd_bus_message_enter_container(m, 'a', "(sa(sv))")) < 0) return r;
    self.call.aux_units = 0;
    while ((r = sd_bus_message_skip(m, "(sa(sv))")) > 0) ++self.call.aux_units;
    const char* job = "/org/freedesktop/systemd1/job/7";
    if ((r = sd_bus_reply_method_return(m, "o", job)) < 0) return r;
    r = sd_bus_emit_signal(sd_bus_message_get_bus(m), "/org/freedesktop/systemd1",
                           "org.freedesktop.systemd1.Manager", "JobRemoved", "uoss", 7u, job,
                           name, self.result.c_str());
    self.called = true;
    return r < 0 ? r : 1;
  }
};

const sd_bus_vtable kManagerVtable[] = {
    SD_BUS_VTABLE_START(0),
    SD_BUS_METHOD("StartTransientUnit", "ssa(sv)a(sa(sv))", "o",
                  FakeManager::start_transient_unit, SD_BUS_VTABLE_UNPRIVILEGED),
    SD_BUS_VTABLE_END};

// Serves the fake manager on `address` until `stop`; `ready` once the name is taken.
void serve(const std::string& address, FakeManager& manager, std::atomic<bool>& ready,
           std::atomic<bool>& stop, std::atomic<bool>& failed) {
  sd_bus* bus = nullptr;
  bool ok = sd_bus_new(&bus) >= 0 && sd_bus_set_address(bus, address.c_str()) >= 0 &&
            sd_bus_set_bus_client(bus, 1) >= 0 && sd_bus_start(bus) >= 0 &&
            sd_bus_add_object_vtable(bus, nullptr, "/org/freedesktop/systemd1",
                                     "org.freedesktop.systemd1.Manager", kManagerVtable,
                                     &manager) >= 0 &&
            sd_bus_request_name(bus, "org.freedesktop.systemd1", 0) >= 0;
  failed = !ok;
  ready = true;
  while (ok && !stop) {
    const int r = sd_bus_process(bus, nullptr);
    if (r < 0) break;
    if (r == 0) sd_bus_wait(bus, 50 * 1000);
  }
  sd_bus_flush_close_unref(bus);
}

bool have_dbus_daemon() {
  return system("command -v dbus-daemon >/dev/null 2>&1") == 0;
}

}  // namespace

TEST_CASE("a delegated scope's request: its name, Delegate=yes, this process, collected",
          "[cgroup][systemd]") {
  const DelegatedScopeRequest request =
      detail::delegated_scope_request(4242, 0x00ab00cd00ef0012ULL);
  CHECK(request.unit_name == "spawnpool-4242-00ab00cd00ef0012.scope");
  CHECK(request.mode == "fail");
  CHECK(request.delegate);
  CHECK(request.pids == std::vector<std::uint32_t>{4242});
  CHECK(request.collect_mode == "inactive-or-failed");
}

TEST_CASE("the unified line of /proc/self/cgroup tells whether a process is in a unit",
          "[cgroup][systemd]") {
  const std::string unit = "spawnpool-1-0000000000000001.scope";
  const std::string scope = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/" + unit;
  CHECK(detail::cgroup_is_in_unit(scope + "\n", unit));
  CHECK(detail::cgroup_is_in_unit("12:memory:/x\n" + scope + "/spawnpool-1-driver\n", unit));
  CHECK_FALSE(detail::cgroup_is_in_unit("0::/user.slice/session-2.scope\n", unit));
  CHECK_FALSE(detail::cgroup_is_in_unit("0::/a/x" + unit + "\n", unit));
  CHECK_FALSE(detail::cgroup_is_in_unit("4:memory:/a/" + unit + "\n", unit));  // v1 only
}

TEST_CASE("no user bus: the scope is not asked for, and the reason says so",
          "[cgroup][systemd]") {
  TempDir dir;
  ScopedEnv bus("DBUS_SESSION_BUS_ADDRESS", ("unix:path=" + dir.path() + "/none").c_str());
  std::string why;
  const bool started = detail::start_delegated_scope(
      detail::delegated_scope_request(getpid(), 1), std::chrono::seconds(5), why);
  CHECK_FALSE(started);
  INFO(why);
  CHECK((why.find("no systemd user bus") != std::string::npos ||
         why.find("libsystemd is not installed") != std::string::npos));
}

TEST_CASE("StartTransientUnit gets the scope's name, mode and properties, the job's end is "
          "awaited and the move checked", "[cgroup][systemd]") {
  const std::string result = GENERATE(as<std::string>{}, "done", "failed");
  TEST_SKIP_UNLESS(have_dbus_daemon(), "no dbus-daemon here (Debian package dbus-daemon)");
  LeakCheck leaks;
  {
    TempDir dir;
    PrivateBus daemon(dir.path());
    REQUIRE(daemon.ready());
    ScopedEnv bus("DBUS_SESSION_BUS_ADDRESS", daemon.address().c_str());
    FakeManager manager;
    manager.result = result;
    std::atomic<bool> ready{false}, stop{false}, failed{false};
    std::thread server(serve, daemon.address(), std::ref(manager), std::ref(ready),
                       std::ref(stop), std::ref(failed));
    REQUIRE(wait_until([&] { return ready.load(); }, std::chrono::seconds(10)));
    const DelegatedScopeRequest request = detail::delegated_scope_request(getpid(), 99);
    std::string why;
    const bool started =
        detail::start_delegated_scope(request, std::chrono::seconds(20), why);
    stop = true;
    server.join();
    REQUIRE_FALSE(failed.load());
    REQUIRE(manager.called.load());
    CHECK(manager.call.name == request.unit_name);
    CHECK(manager.call.mode == "fail");
    CHECK(manager.call.properties == 4);
    CHECK(manager.call.delegate == 1);
    CHECK(manager.call.pids == std::vector<std::uint32_t>{static_cast<std::uint32_t>(getpid())});
    CHECK(manager.call.description == request.description);
    CHECK(manager.call.collect_mode == "inactive-or-failed");
    CHECK(manager.call.aux_units == 0);
    // The fake moves nothing: a "done" job still leaves this process outside the scope.
    CHECK_FALSE(started);
    INFO(why);
    if (result == "done")
      CHECK(why.find("did not move this process into it") != std::string::npos);
    else
      CHECK(why.find("could not start " + request.unit_name + " (job failed)") !=
            std::string::npos);
  }
  leaks.verify();
}

}  // namespace spawnpool::test
