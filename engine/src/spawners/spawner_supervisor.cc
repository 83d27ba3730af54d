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
      cgroups_(cgroups) {
  records_.reserve(channels.size());
  for (std::size_t i = 0; i < channels.size(); ++i) records_.push_back(std::make_unique<Record>());
}

std::string SpawnerSupervisor::spawner_argument(std::uint32_t slot) const {
  return slot < spawner_arguments_.size() ? spawner_arguments_[slot] : std::string();
}

SpawnerSupervisor::~SpawnerSupervisor() {
  close();
  // Here, not in close(): signal_command() may still wake the monitor after close().
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void SpawnerSupervisor::start() {
  try {
    for (std::uint32_t i = 0; i < records_.size(); ++i) {
      std::lock_guard<std::mutex> lock(records_[i]->mutex);
      launch_locked(i, *records_[i]);
    }
    for (std::uint32_t i = 0; i < records_.size(); ++i) {
      Record& record = *records_[i];
      std::string error;
      const bool attached = await_attach(i, record, error);
      std::lock_guard<std::mutex> lock(record.mutex);
      if (!attached) {
        discard_locked(i, record);
        throw std::system_error(ECHILD, std::generic_category(), error);
      }
      record.watched = true;
      record.exit_handled = false;
    }
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (wake_fd_ < 0)
      throw std::system_error(errno, std::generic_category(), "eventfd for the spawner monitor");
    monitor_ = std::thread(&SpawnerSupervisor::monitor_loop, this);
  } catch (...) {
    stopping_ = true;
    stop_all();
    throw;
  }
}

void SpawnerSupervisor::launch_locked(std::uint32_t slot, Record& record) {
  SlotChannel& channel = *channels_[slot];
  channel.reset_for_start();
  try {
    record.process = launch_spawner(spawner_path_, segment_.fd(), slot, spawner_argument(slot));
  } catch (...) {
    channel.mark_spawner_dead();
    throw;
  }
  std::lock_guard<std::mutex> lifeline(record.lifeline_mutex);
  record.lifeline_fd = record.process.lifeline_fd;
  record.unsent.clear();
}

// Without any lock (the wait stalls nothing but its caller), by the thread that launched
// the spawner: nobody else changes the record while it is neither watched nor stopped.
// close() cuts it short. False: the caller discards the spawner (under the lock).
bool SpawnerSupervisor::await_attach(std::uint32_t slot, Record& record, std::string& error) {
  const pid_t pid = record.process.pid;
  const std::int64_t deadline =
      monotonic_ns() + std::chrono::nanoseconds(start_timeout_).count();
  while (!channels_[slot]->wait_for_attach(20)) {
    siginfo_t info{};
    // WNOWAIT: discard_locked() reaps it.
    if (waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      const int status = info.si_code == CLD_EXITED ? (info.si_status & 0xff) << 8
                                                    : info.si_status & 0x7f;
      error = describe_exit(pid, status, true) + " while starting";
      return false;
    }
    if (monotonic_ns() > deadline || stopping_) {
      error = "spawner process " + std::to_string(pid) +
              (stopping_ ? " was not attached when the pool closed" : " did not attach");
      return false;
    }
  }
  return true;
}

// A spawner that never served: killed (it may hang before it reads its lifeline) and
// reaped, so no zombie waits for close().
void SpawnerSupervisor::discard_locked(std::uint32_t slot, Record& record) {
  SpawnerProcess& process = record.process;
  if (process.pid > 0) {
    kill(process.pid, SIGKILL);
    int status = 0;
    bool reaped = false;
    reap(process.pid, status, reaped);
  }
  release_locked(record);
  process.pid = -1;
  record.exit_handled = true;
  channels_[slot]->mark_spawner_dead();
}

void SpawnerSupervisor::release_locked(Record& record) {
  std::lock_guard<std::mutex> lifeline(record.lifeline_mutex);
  release_spawner(record.process);
  record.lifeline_fd = -1;
  record.unsent.clear();
}

bool SpawnerSupervisor::ensure_alive(int slot, SpawnerLoss& loss) {
  SlotChannel& channel = *channels_[slot];
  if (!channel.spawner_dead()) return true;
  Record& record = *records_[slot];
  std::unique_lock<std::mutex> lock(record.mutex);
  // A replacement never starts beside what the dead spawner left: the monitor reaps it
  // and empties its slot's cgroup first.
  record.changed.wait(lock, [&] { return record.exit_handled || stopping_; });
  if (!stopping_ && channel.spawner_dead()) restart(static_cast<std::uint32_t>(slot), record, lock);
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

// The launch under the slot's lock, the attach wait without it (the monitor lists every
// slot's spawner under each slot's lock: a wait held there would stall it for all).
void SpawnerSupervisor::restart(std::uint32_t slot, Record& record,
                                std::unique_lock<std::mutex>& lock) {
  record.restart_error.clear();
  try {
    launch_locked(slot, record);
  } catch (const std::system_error& e) {
    record.restart_error = e.what();
    record.exit_handled = true;
    return;
  }
  record.restarting = true;
  lock.unlock();
  std::string error;
  const bool attached = await_attach(slot, record, error);
  lock.lock();
  record.restarting = false;
  if (attached) {
    record.watched = true;
    record.exit_handled = false;
    wake_monitor();  // to watch its pidfd
  } else {
    record.restart_error = error;
    discard_locked(slot, record);
  }
  record.changed.notify_all();  // close() may wait for the restart to end
}

bool SpawnerSupervisor::pin_to_current_cpu(int slot) {
  Record& record = *records_[slot];
  std::lock_guard<std::mutex> lock(record.mutex);
  const pid_t pid = record.process.pid;
  const SlotChannel& channel = *channels_[slot];
  return pid > 0 && !channel.spawner_dead() &&
         pin_task_to_current_cpu(pid, &record.cpus_before_pin);
}

CpuGiveBack SpawnerSupervisor::give_cpus_back(int slot) {
  Record& record = *records_[slot];
  std::lock_guard<std::mutex> lock(record.mutex);
  const pid_t pid = record.process.pid;
  if (pid <= 0 || channels_[slot]->spawner_dead()) return {};  // nothing left pinned
  return give_back_cpus(pid, record.cpus_before_pin);
}

void SpawnerSupervisor::signal_command(int slot, std::uint32_t request, int sig) {
  // Signal 0 is no signal, and {0, 0} (request numbers wrap) would be the goodbye.
  if (sig <= 0) return;
  Record& record = *records_[slot];
  bool queued = false;
  {
    std::lock_guard<std::mutex> lifeline(record.lifeline_mutex);
    const protocol::CancelMessage message{request, sig};
    // Behind messages still waiting, so that the spawner sees them in order. The same
    // message twice in a row waits once, as the kernel keeps one of a pending signal.
    if (!record.unsent.empty() ||
        send_on_lifeline(record.lifeline_fd, message) == LifelineSend::kWouldBlock) {
      const bool repeat = !record.unsent.empty() && record.unsent.back().number == request &&
                          record.unsent.back().signal == sig;
      if (!repeat) record.unsent.push_back(message);
      queued = true;
    }
  }
  if (queued) wake_monitor();
}

void SpawnerSupervisor::send_unsent(Record& record) {
  std::lock_guard<std::mutex> lifeline(record.lifeline_mutex);
  std::size_t sent = 0;
  while (sent < record.unsent.size()) {
    const LifelineSend result = send_on_lifeline(record.lifeline_fd, record.unsent[sent]);
    if (result == LifelineSend::kWouldBlock) break;
    ++sent;  // kGone too: nobody is left to receive it
  }
  record.unsent.erase(record.unsent.begin(), record.unsent.begin() + sent);
}

void SpawnerSupervisor::replace_broken(int slot) {
  Record& record = *records_[slot];
  std::unique_lock<std::mutex> lock(record.mutex);
  if (record.process.pid > 0) kill(record.process.pid, SIGKILL);
  record.changed.wait(lock, [&] { return record.exit_handled || stopping_; });
}

SpawnerLoss SpawnerSupervisor::loss(int slot) const {
  Record& record = *records_[slot];
  std::lock_guard<std::mutex> lock(record.mutex);
  return record.loss;
}

std::vector<int> SpawnerSupervisor::pids() const {
  std::vector<int> pids;
  for (std::size_t i = 0; i < records_.size(); ++i) {
    std::lock_guard<std::mutex> lock(records_[i]->mutex);
    if (!channels_[i]->spawner_dead() && records_[i]->process.pid > 0)
      pids.push_back(records_[i]->process.pid);
  }
  return pids;
}

void SpawnerSupervisor::wake_monitor() {
  const std::uint64_t one = 1;
  // Cannot fail but by overflowing the counter, and then the monitor is awake anyway.
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof one);
}

// Loop structure: take each slot's lock in turn to list what to watch: the pidfds of
// attached spawners, and the lifelines holding unsent messages (for room); wait for
// either, or a wake-up (a new spawner to watch, a message queued, stop); handle deaths
// (then, outside the lock, empty their slots' cgroups: what the command left behind
// outside its process group, before the slot's job may start a replacement); send what
// the lifelines now have room for. Without pidfds (kernel < 5.3), or when poll() itself
// fails (more spawners than RLIMIT_NOFILE allows it), exits are checked every 100 ms.
void SpawnerSupervisor::monitor_loop() {
  struct Watch {
    std::uint32_t slot;
    bool lifeline;  // else the pidfd
  };
  std::vector<pollfd> fds;
  std::vector<Watch> watched;  // of fds[i]; fds[0] is the wake-up
  for (;;) {
    if (stopping_) return;
    bool check_each = false;
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    watched.assign(1, Watch{0, false});
    for (std::uint32_t i = 0; i < records_.size(); ++i) {
      Record& record = *records_[i];
      std::lock_guard<std::mutex> lock(record.mutex);
      if (!record.watched) continue;
      if (record.process.pidfd < 0) check_each = true;
      fds.push_back(pollfd{record.process.pidfd, POLLIN, 0});
      watched.push_back(Watch{i, false});
      std::lock_guard<std::mutex> lifeline(record.lifeline_mutex);
      if (!record.unsent.empty()) {
        fds.push_back(pollfd{record.lifeline_fd, POLLOUT, 0});
        watched.push_back(Watch{i, true});
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
      Record& record = *records_[watched[i].slot];
      if (watched[i].lifeline) {
        if (fds[i].fd < 0 || fds[i].revents) send_unsent(record);
        continue;
      }
      bool exited;
      {
        std::lock_guard<std::mutex> lock(record.mutex);
        exited = record.watched &&
                 (fds[i].fd >= 0 ? fds[i].revents != 0 : has_exited(record.process.pid));
        if (exited) handle_exit_locked(watched[i].slot, record);
      }
      if (!exited) continue;
      if (cgroups_ != nullptr) cgroups_->kill_slot(watched[i].slot);
      exit_handled(record);
    }
  }
}

void SpawnerSupervisor::handle_exit_locked(std::uint32_t slot, Record& record) {
  int status = 0;
  bool reaped = false;
  reap(record.process.pid, status, reaped);
  record.loss = {FailureStage::kSpawnerDied, describe_exit(record.process.pid, status, reaped)};
  // Its command is an orphan now, still in its own process group: end it. The group id
  // is safe to use while the command is unreaped; the window after that is tiny.
  if (const pid_t child = channels_[slot]->command_pid(); child > 0) kill(-child, SIGKILL);
  release_locked(record);
  record.process.pid = -1;
  record.watched = false;
  channels_[slot]->mark_spawner_dead();
}

void SpawnerSupervisor::exit_handled(Record& record) {
  {
    std::lock_guard<std::mutex> lock(record.mutex);
    record.exit_handled = true;
  }
  record.changed.notify_all();
}

// Stops the monitor first, so that the exits close() causes are not taken for crashes.
void SpawnerSupervisor::close() {
  std::lock_guard<std::mutex> once(close_mutex_);
  if (stopping_.exchange(true)) return;
  wake_monitor();
  if (monitor_.joinable()) monitor_.join();
  for (auto& record : records_) {
    // A restart under way sees stopping_ within 20 ms and discards its spawner. Under
    // the lock, so that a waiter checks stopping_ before it sleeps or sees this.
    std::unique_lock<std::mutex> lock(record->mutex);
    record->changed.wait(lock, [&] { return !record->restarting; });
    record->changed.notify_all();
  }
  stop_all();
}

void SpawnerSupervisor::stop_all() {
  for (std::uint32_t i = 0; i < records_.size(); ++i) {
    Record& record = *records_[i];
    std::lock_guard<std::mutex> lock(record.mutex);
    SpawnerProcess& process = record.process;
    if (process.pid <= 0 || channels_[i]->spawner_dead()) continue;
    // EOF on the lifeline makes the spawner SIGKILL its command's group (with a cgroup:
    // its slot) and exit; after the goodbye, it leaves the other cgroups to the driver.
    say_goodbye(process);
    release_locked(record);
    int status = 0;
    bool reaped = false;
    reap(process.pid, status, reaped);
    process.pid = -1;
    record.watched = false;
    record.exit_handled = true;
    record.loss = {FailureStage::kPoolClosed, "the pool was closed"};
    channels_[i]->mark_spawner_dead();
  }
}

}  // namespace spawnpool::detail
