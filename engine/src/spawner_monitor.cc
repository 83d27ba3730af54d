// The spawners' lifetime on the driver side: start, attach, death, replacement, close.
// Every change to a slot's SpawnerProcess happens under PoolCore::mutex_, on the monitor
// thread once it runs (or in the constructor and close(), when it does not).
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "pool_core.h"
#include "worker_pool/protocol/monotonic_clock.h"
#include "worker_pool/protocol/futex.h"

namespace spawnpool::detail {
namespace {

std::string describe_exit(pid_t pid, int status, bool reaped) {
  const std::string who = "spawner process " + std::to_string(pid);
  if (!reaped) return who + " ended";
  if (WIFSIGNALED(status))
    return who + " was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return who + " exited with status " + std::to_string(WEXITSTATUS(status));
}

void reap(pid_t pid, int& status, bool& reaped) {
  pid_t got;
  do got = waitpid(pid, &status, 0);
  while (got < 0 && errno == EINTR);
  reaped = got == pid;  // ECHILD: the driver reaps children itself (SIGCHLD ignored)
}

}  // namespace

void PoolCore::init_spawners() {
  for (std::uint32_t i = 0; i < segment_.header().slot_count; ++i) {
    slots_.push_back(std::make_unique<Slot>());
    slots_.back()->view = segment_.slot(i);
  }
  try {
    for (std::uint32_t i = 0; i < slots_.size(); ++i) start_spawner(i);
  } catch (...) {
    close();
    throw;
  }
  // The spawners hold the segment through their inherited descriptor: the name can go.
  segment_.unlink_name();
  for (auto& slot : slots_) {
    std::string error;
    if (!await_attach(*slot, error)) {
      close();
      throw std::system_error(ECHILD, std::generic_category(), error);
    }
  }
  for (int i = static_cast<int>(slots_.size()) - 1; i >= 0; --i) free_slots_.push_back(i);
  monitor_wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  monitor_ = std::thread(&PoolCore::monitor_loop, this);
}

void PoolCore::start_spawner(std::uint32_t index) {
  Slot& slot = *slots_[index];
  slot.view.control->state.store(protocol::kStarting);
  slot.view.control->child_pid.store(0);
  slot.spawner = launch_spawner(options_.spawner_path, segment_.fd(), index);
  slot.dead.store(false);
}

bool PoolCore::await_attach(Slot& slot, std::string& error) {
  const std::int64_t deadline =
      monotonic_ns() + std::chrono::nanoseconds(options_.start_timeout).count();
  auto& state = slot.view.control->state;
  while (state.load() == protocol::kStarting) {
    int status = 0;
    if (waitpid(slot.spawner.pid, &status, WNOHANG) == slot.spawner.pid) {
      error = describe_exit(slot.spawner.pid, status, true) + " while starting";
      slot.spawner.pid = -1;
      return false;
    }
    if (monotonic_ns() > deadline) {
      error = "spawner process " + std::to_string(slot.spawner.pid) + " did not attach";
      return false;
    }
    futex_wait(state, protocol::kStarting, 20);
  }
  return true;
}

// Called by a submitter that found its slot's spawner dead: asks the monitor for a
// replacement and waits for it.
bool PoolCore::ensure_spawner(Slot& slot, std::string& error) {
  std::unique_lock<std::mutex> lock(mutex_);
  slot.restart_requested = true;
  slot.restart_error.clear();
  wake_monitor();
  spawner_changed_.wait(lock, [&] { return !slot.restart_requested || stop_monitor_; });
  if (slot.dead.load()) {
    error = slot.restart_error.empty() ? "the pool is closed"
                                       : "no spawner for the command: " + slot.restart_error;
    return false;
  }
  return true;
}

void PoolCore::wake_monitor() {
  const std::uint64_t one = 1;
  if (monitor_wake_fd_ >= 0) (void)!write(monitor_wake_fd_, &one, sizeof one);
}

// Loop structure: wait for a spawner to exit (its pidfd) or a wake-up (restart request,
// stop); handle deaths, then requested restarts. Without pidfds it polls every 100 ms.
void PoolCore::monitor_loop() {
  std::vector<pollfd> fds;
  std::vector<Slot*> watched;
  for (;;) {
    bool poll_for_exit = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stop_monitor_) return;
      fds.assign(1, pollfd{monitor_wake_fd_, POLLIN, 0});
      watched.assign(1, nullptr);
      for (auto& slot : slots_) {
        if (slot->dead.load()) continue;
        if (slot->spawner.pidfd < 0) poll_for_exit = true;
        fds.push_back(pollfd{slot->spawner.pidfd, POLLIN, 0});
        watched.push_back(slot.get());
      }
    }
    if (poll(fds.data(), fds.size(), poll_for_exit ? 100 : -1) < 0 && errno != EINTR) continue;
    std::uint64_t drained;
    if (fds[0].revents) (void)!read(monitor_wake_fd_, &drained, sizeof drained);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      siginfo_t info{};
      const bool exited =
          fds[i].fd >= 0 ? fds[i].revents != 0
                         : waitid(P_PID, watched[i]->spawner.pid, &info,
                                  WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
      if (exited) handle_spawner_exit(*watched[i]);
    }
    restart_requested_spawners();
  }
}

void PoolCore::handle_spawner_exit(Slot& slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  int status = 0;
  bool reaped = false;
  reap(slot.spawner.pid, status, reaped);
  slot.death = describe_exit(slot.spawner.pid, status, reaped);
  // Its command is an orphan now, still in its own process group: end it. The group id
  // is safe to use while the command is unreaped; the window after that is tiny.
  if (const pid_t child = slot.view.control->child_pid.load(); child > 0) kill(-child, SIGKILL);
  release_spawner(slot.spawner);
  mark_dead(slot);
  spawner_changed_.notify_all();
}

// The dead flag first, then the state (both seq_cst): see await_driver_turn(). A waiter
// whose turn it is not is woken with kSpawnerDead.
void PoolCore::mark_dead(Slot& slot) {
  slot.dead.store(true, std::memory_order_seq_cst);
  auto& state = slot.view.control->state;
  std::uint32_t seen = state.load(std::memory_order_seq_cst);
  while (protocol::is_spawner_turn(seen) &&
         !state.compare_exchange_weak(seen, protocol::kSpawnerDead)) {
  }
  futex_wake_all(state);
}

void PoolCore::restart_requested_spawners() {
  for (std::uint32_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = *slots_[i];
    std::unique_lock<std::mutex> lock(mutex_);
    if (!slot.restart_requested) continue;
    try {
      start_spawner(i);
      std::string error;
      if (!await_attach(slot, error)) {
        if (slot.spawner.pid > 0) kill(slot.spawner.pid, SIGKILL);
        release_spawner(slot.spawner);
        slot.dead.store(true);
        slot.restart_error = error;
      }
    } catch (const std::system_error& e) {
      slot.dead.store(true);
      slot.restart_error = e.what();
    }
    slot.restart_requested = false;
    spawner_changed_.notify_all();
  }
}

// Stops the monitor first, so that the deaths close() causes are not taken for crashes.
void PoolCore::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return;
    closed_ = true;
    stop_monitor_ = true;
  }
  wake_monitor();
  if (monitor_.joinable()) monitor_.join();
  slot_freed_.notify_all();
  spawner_changed_.notify_all();
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& slot : slots_) {
    if (slot->spawner.pid <= 0 || slot->dead.load()) continue;
    // EOF on the lifeline makes the spawner SIGKILL its command's group and exit.
    release_spawner(slot->spawner);
    int status = 0;
    bool reaped = false;
    reap(slot->spawner.pid, status, reaped);
    slot->death = "the pool was closed";
    mark_dead(*slot);
  }
  if (monitor_wake_fd_ >= 0) ::close(monitor_wake_fd_);
  monitor_wake_fd_ = -1;
}

PoolCore::~PoolCore() { close(); }

}  // namespace spawnpool::detail
