// A seccomp filter that makes one system call fail with EPERM, as a sandbox's policy
// would, for tests of what a refused call does, and the forked copy of the test process
// to install it in (the filter stays with the process that installs it and everything
// it forks and executes). Header-only.
#pragma once

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spawnpool::test {

/// Makes every call of system call `nr` whose arguments equal all of `equal` (argument
/// index, 64-bit value) fail with EPERM; other calls go through. False if this kernel or
/// architecture cannot. PR_SET_NO_NEW_PRIVS stays set.
inline bool refuse_with_eperm(int nr, const std::vector<std::pair<int, std::uint64_t>>& equal) {
  const std::uint32_t arch =
#if defined(__x86_64__)
      AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
      AUDIT_ARCH_AARCH64;
#else
      0;
#endif
  if (arch == 0) return false;
  // Straight-line BPF: a mismatch jumps to the ALLOW at the end, a full match falls
  // through to the EPERM before it.
  std::vector<sock_filter> filter = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
  };
  std::vector<std::size_t> to_allow;  // the jumps to patch: their index
  const auto compare = [&](std::uint32_t offset, std::uint32_t value) {
    filter.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offset));
    to_allow.push_back(filter.size());
    filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, value, 0, 0));
  };
  to_allow.push_back(filter.size());
  filter.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 0));
  for (const auto& [index, value] : equal) {
    const std::uint32_t at = offsetof(seccomp_data, args) + 8 * static_cast<std::uint32_t>(index);
    compare(at, static_cast<std::uint32_t>(value));           // little-endian: low word first
    compare(at + 4, static_cast<std::uint32_t>(value >> 32));
  }
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)));
  filter.push_back(BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW));
  for (const std::size_t jump : to_allow)
    filter[jump].jf = static_cast<unsigned char>(filter.size() - 1 - (jump + 1));
  const sock_fprog program{static_cast<unsigned short>(filter.size()), filter.data()};
  return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

/// What a forked copy of this process did: its wait status and what it wrote.
struct ForkedCopy {
  int status = -1;  // as from waitpid(); -1 when no copy could be made
  std::string output;
};

/// Runs `body(out_fd)` in a forked copy of this process, which exits with its result,
/// and waits for it. Only the calling thread exists in the copy.
inline ForkedCopy run_in_forked_copy(const std::function<int(int out_fd)>& body) {
  ForkedCopy copy;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return copy;
  const pid_t pid = fork();
  if (pid == 0) _exit(body(fds[1]));
  close(fds[1]);
  char buffer[4096];
  for (ssize_t n; pid > 0 && (n = read(fds[0], buffer, sizeof buffer)) != 0;)
    if (n > 0) copy.output.append(buffer, static_cast<std::size_t>(n));
    else if (errno != EINTR) break;
  close(fds[0]);
  while (pid > 0 && waitpid(pid, &copy.status, 0) < 0 && errno == EINTR) {
  }
  return copy;
}

}  // namespace spawnpool::test
