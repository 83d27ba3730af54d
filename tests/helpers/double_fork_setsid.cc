// double_fork_setsid [SECONDS]: leaves a process that a process group kill cannot reach:
// a child calls setsid() (a new session and process group) and forks the grandchild,
// then exits, so the grandchild is an orphan in another session and group. The
// grandchild prints its pid on stdout, lets go of stdout/stderr, and sleeps SECONDS
// (default 60, a safety net: the test kills it through the cgroup). Exits 0 once the
// child has exited.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "tests/helpers/write_all.h"

int main(int argc, char** argv) {
  const unsigned seconds = argc > 1 ? static_cast<unsigned>(std::atoi(argv[1])) : 60;
  const pid_t child = fork();
  if (child < 0) return 3;
  if (child == 0) {
    setsid();
    const pid_t grandchild = fork();
    if (grandchild < 0) _exit(3);
    if (grandchild == 0) {
      const std::string line = std::to_string(getpid()) + "\n";
      spawnpool::test::write_all(1, line.data(), line.size());
      const int null_fd = open("/dev/null", O_RDWR);
      dup2(null_fd, 1);
      dup2(null_fd, 2);
      for (unsigned left = seconds; left > 0;) left = sleep(left);
      _exit(0);
    }
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 4;
}
