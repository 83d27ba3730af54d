// kill_self SIGNAL: dies by SIGNAL (its disposition reset to default first, no core
// file); exits 100 if it somehow survives.
#include <signal.h>
#include <sys/resource.h>

#include <cstdlib>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const int sig = std::atoi(argv[1]);
  const rlimit no_core{0, 0};
  setrlimit(RLIMIT_CORE, &no_core);
  signal(sig, SIG_DFL);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, sig);
  sigprocmask(SIG_UNBLOCK, &set, nullptr);
  raise(sig);
  return 100;
}
