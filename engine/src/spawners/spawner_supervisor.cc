#include "engine/src/spawners/spawner_supervisor.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include "worker_pool/protocol/cpu_affinity.h"
#include "worker_pool/protocol/monotonic_clock.h"

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

bool has_exited(pid_t pid) {
  siginfo_t info{};
  return waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0;
}

}  // namespace

SpawnerSupervisor::SpawnerSupervisor(std::string spawner_path,
                                     std::chrono::milliseconds start_timeout, Segment& segment,
                                     std::vector<std::unique_ptr<SlotChannel>>& channels,
                                     std::vector<std::string> spawner_arguments,
                                     const CgroupTree* cgroups)
    : spawner_path_(std::move(spawner_path)),
      start_timeout_(start_timeout),
      segment_(segment),
      channels_(channels),
      spawner_arguments_(std::move(spawner_arguments)),
      cgroups_(cgroups),
      records_(channels.size()) {}

std::string SpawnerSupervisor::spawner_argument(std::uint32_t slot) const {
  return slot < spawner_arguments_.size() ? spawner_arguments_[slot] : std::string();
}

SpawnerSupervisor::~SpawnerSupervisor() { close(); }

void SpawnerSupervisor::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  try {
    for (std::uint32_t i = 0; i < records_.size(); ++i) launch_locked(i);
    for (std::uint32_t i = 0; i < records_.size(); ++i) {
      std::string error;
      if (!await_attach_locked(i, error))
        throw std::system_error(ECHILD, std::generic_category(), error);
    }
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0)
      throw std::system_error(errno, std::generic_category(), "eventfd for the spawner monitor");
    monitor_ = std::thread(&SpawnerSupervisor::monitor_loop, this);
  } catch (...) {
    stopping_ = true;
    stop_all_locked();
    throw;
  }
}

void SpawnerSupervisor::launch_locked(std::uint32_t slot) {
  SlotChannel& channel = *channels_[slot];
  channel.reset_for_start();
  try {
    records_[slot].process =
        launch_spawner(spawner_path_, segment_.fd(), slot, spawner_argument(slot));
  } catch (...) {
    channel.mark_spawner_dead();
    throw;
  }
}

bool SpawnerSupervisor::await_attach_locked(std::uint32_t slot, std::string& error) {
  SpawnerProcess& process = records_[slot].process;
  const std::int64_t deadline =
      monotonic_ns() + std::chrono::nanoseconds(start_timeout_).count();
  while (!channels_[slot]->wait_for_attach(20)) {
    int status = 0;
    if (waitpid(process.pid, &status, WNOHANG) == process.pid) {
      error = describe_exit(process.pid, status, true) + " while starting";
      process.pid = -1;
      discard_locked(slot);
      return false;
    }
    if (monotonic_ns() > deadline) {
      error = "spawner process " + std::to_string(process.pid) + " did not attach";
      discard_locked(slot);
      return false;
    }
  }
  return true;
}

// A spawner that never served: killed (it may hang before it reads its lifeline) and
// reaped, so no zombie waits for close().
void SpawnerSupervisor::discard_locked(std::uint32_t slot) {
  SpawnerProcess& process = records_[slot].process;
  if (process.pid > 0) {
    kill(process.pid, SIGKILL);
    int status = 0;
    bool reaped = false;
    reap(process.pid, status, reaped);
  }
  release_spawner(process);
  process.pid = -1;
  channels_[slot]->mark_spawner_dead();
}

bool SpawnerSupervisor::ensure_alive(int slot, SpawnerLoss& loss) {
  SlotChannel& channel = *channels_[slot];
  if (!channel.spawner_dead()) return true;
  std::unique_lock<std::mutex> lock(mutex_);
  Record& record = records_[slot];
  if (!stopping_) {
    record.restart_requested = true;
    record.restart_error.clear();
    wake_monitor();
    spawner_changed_.wait(lock, [&] { return !record.restart_requested || stopping_; });
  }
  if (!channel.spawner_dead()) return true;
  if (stopping_) {
    loss = {FailureStage::kPoolClosed, "the pool is closed"};
  } else {
    const std::string& why =
        record.restart_error.empty() ? record.loss.description : record.restart_error;
    loss = {FailureStage::kSpawnerDied, "no spawner for the command: " + why};
  }
  return false;
}

bool SpawnerSupervisor::pin_to_current_cpu(int slot) {
  std::lock_guard<std::mutex> lock(mutex_);
  const pid_t pid = records_[slot].process.pid;
  const SlotChannel& channel = *channels_[slot];
  return pid > 0 && !channel.spawner_dead() &&
         pin_task_to_current_cpu(pid, channel.spawner_cpus());
}

void SpawnerSupervisor::signal_command(int slot, std::uint32_t request, int sig) {
  std::lock_guard<std::mutex> lock(mutex_);
  signal_spawner_command(records_[slot].process, request, sig);
}

void SpawnerSupervisor::replace_broken(int slot) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (records_[slot].process.pid > 0) kill(records_[slot].process.pid, SIGKILL);
  spawner_changed_.wait(lock, [&] { return channels_[slot]->spawner_dead() || stopping_; });
}

SpawnerLoss SpawnerSupervisor::loss(int slot) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return records_[slot].loss;
}

std::vector<int> SpawnerSupervisor::pids() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<int> pids;
  for (std::size_t i = 0; i < records_.size(); ++i)
    if (!channels_[i]->spawner_dead() && records_[i].process.pid > 0)
      pids.push_back(records_[i].process.pid);
  return pids;
}

void SpawnerSupervisor::wake_monitor() {
  const std::uint64_t one = 1;
  // Cannot fail but by overflowing the counter, and then the monitor is awake anyway.
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
}

// Loop structure: wait for a spawner to exit (its pidfd) or a wake-up (restart request,
// stop); handle deaths (then, outside the lock, empty their slots' cgroups: what the
// command left behind outside its process group), then requested restarts, which thus
// never start on a slot still holding a dead spawner's processes. Without pidfds
// (kernel < 5.3), or when poll() itself fails (more spawners than RLIMIT_NOFILE allows
// it), exits are checked every 100 ms.
void SpawnerSupervisor::monitor_loop() {
  std::vector<pollfd> fds;
  std::vector<std::uint32_t> watched;  // slot of fds[i]; fds[0] is the wake-up
  for (;;) {
    bool check_each = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
      watched.assign(1, 0);
      for (std::uint32_t i = 0; i < records_.size(); ++i) {
        if (channels_[i]->spawner_dead()) continue;
        if (records_[i].process.pidfd < 0) check_each = true;
        fds.push_back(pollfd{records_[i].process.pidfd, POLLIN, 0});
        watched.push_back(i);
      }
    }
    if (poll(fds.data(), fds.size(), check_each ? 100 : -1) < 0 && errno != EINTR) {
      const timespec pause{0, 100 * 1000 * 1000};
      nanosleep(&pause, nullptr);
      for (pollfd& fd : fds) fd.fd = -1;  // poll() told nothing: check every spawner
    }
    std::uint64_t drained;
    if (fds[0].revents) (void)!read(wake_fd_, &drained, sizeof drained);
    for (std::size_t i = 1; i < fds.size(); ++i) {
      bool exited;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        exited = fds[i].fd >= 0 ? fds[i].revents != 0
                                : has_exited(records_[watched[i]].process.pid);
        if (exited) handle_exit_locked(watched[i]);
      }
      if (exited && cgroups_ != nullptr) cgroups_->kill_slot(watched[i]);
    }
    restart_requested_spawners();
  }
}

void SpawnerSupervisor::handle_exit_locked(std::uint32_t slot) {
  Record& record = records_[slot];
  int status = 0;
  bool reaped = false;
  reap(record.process.pid, status, reaped);
  record.loss = {FailureStage::kSpawnerDied, describe_exit(record.process.pid, status, reaped)};
  // Its command is an orphan now, still in its own process group: end it. The group id
  // is safe to use while the command is unreaped; the window after that is tiny.
  if (const pid_t child = channels_[slot]->command_pid(); child > 0) kill(-child, SIGKILL);
  release_spawner(record.process);
  record.process.pid = -1;
  channels_[slot]->mark_spawner_dead();
  spawner_changed_.notify_all();
}

void SpawnerSupervisor::restart_requested_spawners() {
  for (std::uint32_t i = 0; i < records_.size(); ++i) {
    std::lock_guard<std::mutex> lock(mutex_);
    Record& record = records_[i];
    if (!record.restart_requested) continue;
    try {
      launch_locked(i);
      std::string error;
      if (!await_attach_locked(i, error)) record.restart_error = error;
    } catch (const std::system_error& e) {
      record.restart_error = e.what();
    }
    record.restart_requested = false;
    spawner_changed_.notify_all();
  }
}

// Stops the monitor first, so that the exits close() causes are not taken for crashes.
void SpawnerSupervisor::close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_monitor();
  if (monitor_.joinable()) monitor_.join();
  spawner_changed_.notify_all();
  std::lock_guard<std::mutex> lock(mutex_);
  stop_all_locked();
}

void SpawnerSupervisor::stop_all_locked() {
  for (std::uint32_t i = 0; i < records_.size(); ++i) {
    SpawnerProcess& process = records_[i].process;
    if (process.pid <= 0 || channels_[i]->spawner_dead()) continue;
    // EOF on the lifeline makes the spawner SIGKILL its command's group (with a cgroup:
    // its slot) and exit; after the goodbye, it leaves the other cgroups to the pool.
    say_goodbye(process);
    release_spawner(process);
    int status = 0;
    bool reaped = false;
    reap(process.pid, status, reaped);
    process.pid = -1;
    records_[i].loss = {FailureStage::kPoolClosed, "the pool was closed"};
    channels_[i]->mark_spawner_dead();
  }
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

}  // namespace spawnpool::detail
