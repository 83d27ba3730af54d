#include "worker_pool/cgroup/cgroup_systemd_scope.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#if __has_include(<systemd/sd-bus.h>)
#include <systemd/sd-bus.h>
#define SPAWNPOOL_HAVE_SD_BUS_HEADER 1
#endif

namespace spawnpool::detail {

DelegatedScopeRequest delegated_scope_request(pid_t pid, std::uint64_t random_bits) {
  char name[64];
  std::snprintf(name, sizeof name, "spawnpool-%d-%016" PRIx64 ".scope", static_cast<int>(pid),
                random_bits);
  DelegatedScopeRequest request;
  request.unit_name = name;
  request.description = "spawnpool: slot cgroups of process " + std::to_string(pid);
  request.pids.push_back(static_cast<std::uint32_t>(pid));
  return request;
}

bool cgroup_is_in_unit(const std::string& proc_self_cgroup, const std::string& unit_name) {
  std::istringstream lines(proc_self_cgroup);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("0::", 0) != 0) continue;
    const std::string path = line.substr(3) + "/";
    return path.find("/" + unit_name + "/") != std::string::npos;
  }
  return false;
}

#ifndef SPAWNPOOL_HAVE_SD_BUS_HEADER

bool start_delegated_scope(const DelegatedScopeRequest&, std::chrono::milliseconds,
                           std::string& why) {
  why = "built without libsystemd's headers (libsystemd-dev), so no systemd scope is asked for";
  return false;
}

#else

namespace {

// The few sd-bus calls used, from libsystemd.so.0 loaded at run time: a machine without
// libsystemd still runs the pool (without slot cgroups), and nothing links it at build
// time. The types come from the header, so each pointer has the library's signature.
struct SdBus {
  decltype(&sd_bus_open_user) open_user = nullptr;
  decltype(&sd_bus_flush_close_unref) flush_close_unref = nullptr;
  decltype(&sd_bus_call_method) call_method = nullptr;
  decltype(&sd_bus_match_signal) match_signal = nullptr;
  decltype(&sd_bus_process) process = nullptr;
  decltype(&sd_bus_wait) wait = nullptr;
  decltype(&sd_bus_message_read) message_read = nullptr;
  decltype(&sd_bus_message_unref) message_unref = nullptr;
  decltype(&sd_bus_error_free) error_free = nullptr;
};

template <typename Function>
bool resolve(void* library, const char* name, Function& function) {
  function = reinterpret_cast<Function>(dlsym(library, name));
  return function != nullptr;
}

// Loaded once and kept: unloading a library whose state a bus may reference buys nothing.
const SdBus* load_sd_bus(std::string& why) {
  static SdBus bus;
  static std::string failure;
  static const bool loaded = [] {
    void* library = dlopen("libsystemd.so.0", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      failure = std::string("libsystemd is not installed (") + dlerror() + ")";
      return false;
    }
    const bool all = resolve(library, "sd_bus_open_user", bus.open_user) &&
                     resolve(library, "sd_bus_flush_close_unref", bus.flush_close_unref) &&
                     resolve(library, "sd_bus_call_method", bus.call_method) &&
                     resolve(library, "sd_bus_match_signal", bus.match_signal) &&
                     resolve(library, "sd_bus_process", bus.process) &&
                     resolve(library, "sd_bus_wait", bus.wait) &&
                     resolve(library, "sd_bus_message_read", bus.message_read) &&
                     resolve(library, "sd_bus_message_unref", bus.message_unref) &&
                     resolve(library, "sd_bus_error_free", bus.error_free);
    if (!all) failure = "libsystemd.so.0 lacks sd-bus calls (systemd before 237)";
    return all;
  }();
  why = failure;
  return loaded ? &bus : nullptr;
}

constexpr const char* kManagerName = "org.freedesktop.systemd1";
constexpr const char* kManagerPath = "/org/freedesktop/systemd1";
constexpr const char* kManagerInterface = "org.freedesktop.systemd1.Manager";

struct JobWait {
  const SdBus* bus = nullptr;
  std::string job;     // the job's object path, once StartTransientUnit answered
  bool done = false;
  std::string result;  // JobRemoved's: "done" when the scope started
};

// JobRemoved(u id, o job, s unit, s result): systemd sends it to the job's requester.
int on_job_removed(sd_bus_message* message, void* data, sd_bus_error*) {
  auto& wait = *static_cast<JobWait*>(data);
  std::uint32_t id = 0;
  const char *job = nullptr, *unit = nullptr, *result = nullptr;
  if (wait.bus->message_read(message, "uoss", &id, &job, &unit, &result) < 0) return 0;
  if (!wait.job.empty() && wait.job == job) {
    wait.done = true;
    wait.result = result;
  }
  return 0;
}

std::string bus_error_text(const sd_bus_error& error, int r) {
  if (error.message != nullptr) return error.message;
  if (error.name != nullptr) return error.name;
  return std::strerror(-r);
}

std::string read_proc_self_cgroup() {
  std::ifstream file("/proc/self/cgroup");
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

// The call, with the request's four properties in one append (sd-bus's "a(sv)" takes
// the count, then each name, the variant's signature and its value).
int call_start_transient_unit(const SdBus& bus, sd_bus* connection,
                              const DelegatedScopeRequest& request, sd_bus_error& error,
                              sd_bus_message*& reply) {
  if (request.pids.size() != 1) return -EINVAL;
  return bus.call_method(connection, kManagerName, kManagerPath, kManagerInterface,
                         "StartTransientUnit", &error, &reply, "ssa(sv)a(sa(sv))",
                         request.unit_name.c_str(), request.mode.c_str(), 4,
                         "Description", "s", request.description.c_str(),
                         "Delegate", "b", static_cast<int>(request.delegate),
                         "PIDs", "au", 1, request.pids[0],
                         "CollectMode", "s", request.collect_mode.c_str(), 0);
}

// Loop structure: dispatch what the bus holds (JobRemoved sets wait.done); when nothing
// is left, wait for the bus until the deadline.
bool wait_for_job(const SdBus& bus, sd_bus* connection, JobWait& wait,
                  std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!wait.done) {
    const int r = bus.process(connection, nullptr);
    if (r < 0) return false;
    if (r > 0) continue;
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::steady_clock::duration::zero()) return false;
    const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(left).count();
    if (bus.wait(connection, static_cast<std::uint64_t>(usec)) < 0) return false;
  }
  return true;
}

}  // namespace

bool start_delegated_scope(const DelegatedScopeRequest& request,
                           std::chrono::milliseconds timeout, std::string& why) {
  const SdBus* bus = load_sd_bus(why);
  if (bus == nullptr) return false;
  sd_bus* connection = nullptr;
  int r = bus->open_user(&connection);
  if (r < 0) {
    why = std::string("no systemd user bus (") + std::strerror(-r) + ")";
    return false;
  }
  JobWait wait;
  wait.bus = bus;
  // Before the call, so that the job's end cannot pass unseen.
  r = bus->match_signal(connection, nullptr, nullptr, kManagerPath, kManagerInterface,
                        "JobRemoved", on_job_removed, &wait);
  sd_bus_error error = SD_BUS_ERROR_NULL;
  sd_bus_message* reply = nullptr;
  if (r >= 0) r = call_start_transient_unit(*bus, connection, request, error, reply);
  const char* job = nullptr;
  if (r >= 0) r = bus->message_read(reply, "o", &job);
  bool ok = false;
  if (r < 0) {
    why = "the systemd user manager did not start a scope (" + bus_error_text(error, r) + ")";
  } else {
    wait.job = job;
    if (!wait_for_job(*bus, connection, wait, timeout))
      why = "the systemd user manager did not start " + request.unit_name + " in time";
    else if (wait.result != "done")
      why = "the systemd user manager could not start " + request.unit_name + " (job " +
            wait.result + ")";
    else if (!cgroup_is_in_unit(read_proc_self_cgroup(), request.unit_name))
      why = "the systemd user manager started " + request.unit_name +
            " but did not move this process into it";
    else
      ok = true;
  }
  if (reply != nullptr) bus->message_unref(reply);
  bus->error_free(&error);
  bus->flush_close_unref(connection);  // frees the match too
  return ok;
}

#endif

}  // namespace spawnpool::detail
