// spawn_grandchild SECONDS: starts a background process that keeps stdout and stderr
// open for SECONDS, prints its pid on stdout and exits 0 at once, as a daemonizing
// tool does. The test kills the grandchild when done.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/helpers/write_all.h"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const unsigned seconds = static_cast<unsigned>(std::atoi(argv[1]));
  const pid_t pid = fork();
  if (pid < 0) return 3;
  if (pid == 0) {
    setsid();  // out of the command's group too: only the pipe ties it to the command
    for (unsigned left = seconds; left > 0;) left = sleep(left);
    _exit(0);
  }
  const std::string line = std::to_string(pid) + "\n";
  spawnpool::test::write_all(1, line.data(), line.size());
  return 0;
}
