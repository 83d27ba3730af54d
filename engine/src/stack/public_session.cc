// spawnpool::Session (spawnpool/session.h), the public API, over the engine's Session
// (session.h): the same stack the bindings use, with nothing of its own but the text
// of the end of the build, and the default of the local slots.
#include "spawnpool/session.h"

#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <thread>
#include <utility>

#include "engine/src/stack/session.h"

namespace spawnpool {

Session::Session(Pool& pool, SessionOptions options)
    : message_prefix_(options.message_prefix) {
  session_ = std::make_unique<detail::Session>(pool, std::move(options));
}

Session::~Session() = default;

Result Session::run(Command command) { return session_->run(std::move(command)); }

Result Session::run_check(Command command) {
  return session_->run(std::move(command), /*check=*/true);
}

void Session::finish() { session_->finish(); }

namespace {

// The CPUs this process may run on (its affinity mask, which a container or `taskset`
// narrows), on hosts of any size: the mask grows until the kernel's fits.
std::size_t usable_cpus() {
  for (int cpus = 1024; cpus <= (1 << 16); cpus *= 2) {
    cpu_set_t* set = CPU_ALLOC(cpus);
    if (set == nullptr) break;
    const std::size_t size = CPU_ALLOC_SIZE(cpus);
    const int got = sched_getaffinity(0, size, set);
    const int count = got == 0 ? CPU_COUNT_S(size, set) : 0;
    CPU_FREE(set);
    if (got == 0) return count > 0 ? static_cast<std::size_t>(count) : 1;
    if (errno != EINVAL) break;  // EINVAL: the kernel's mask is larger than this one
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

bool blank(const std::string& text) {
  return text.find_first_not_of(" \t\n") == std::string::npos;
}

}  // namespace

std::size_t default_local_slots(const std::string& launcher) {
  return blank(launcher) ? 0 : usable_cpus();
}

std::string Session::report() const {
  std::string text = session_->statistics_report(message_prefix_);
  const std::string summary = session_->launcher_summary();
  if (!summary.empty()) text += summary + "\n";
  return text;
}

}  // namespace spawnpool
