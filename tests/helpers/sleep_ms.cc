// sleep_ms MS: sleeps MS milliseconds (through signal handlers, should any exist), then
// exits 0. The long-running command of the cancel and crash tests.
#include <time.h>

#include <cerrno>
#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const long ms = std::atol(argv[1]);
  timespec left{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
  return 0;
}
