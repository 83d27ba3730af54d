// alloc_touch MIB [HOLD_MS [PROCESSES]]: each of PROCESSES processes (default 1: this one;
// more are forked first) allocates MIB MiB of anonymous memory, writes to every page so
// that all of it is charged, holds it HOLD_MS ms, then exits 0; the first waits for the
// others. With several, each holds only once all have touched theirs (or died), so that
// their peaks overlap however slowly they touch (under QEMU's TCG: seconds). The command
// of the peak-accuracy and OOM tests: its peak is known.
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>

namespace {

void sleep_ms(long ms) {
  timespec left{ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&left, &left) != 0 && errno == EINTR) {
  }
}

// The forked ones' "touched" bytes to the first, and the first's "go" to them (EOF).
int touched[2] = {-1, -1}, go[2] = {-1, -1};

bool allocate(std::size_t bytes) {
  void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED) return false;
  volatile char* bytes_of = static_cast<volatile char*>(memory);
  const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  for (std::size_t at = 0; at < bytes; at += page) bytes_of[at] = 1;
  return true;
}

// A forked one: touch, tell the first, wait for its go (EOF: it closed or died), hold.
int forked_one(std::size_t bytes, long hold_ms) {
  close(touched[0]);
  close(go[1]);
  if (!allocate(bytes)) return 3;
  char byte = 1, ignored;
  (void)!write(touched[1], &byte, 1);
  while (read(go[0], &ignored, 1) < 0 && errno == EINTR) {
  }
  sleep_ms(hold_ms);
  return 0;
}

// The first: touch, wait until every forked one touched or died (EOF), let them go, hold.
int first_one(std::size_t bytes, long hold_ms, int forked) {
  if (!allocate(bytes)) return 3;
  if (forked > 0) {
    close(touched[1]);
    char ignored;
    for (int seen = 0; seen < forked;) {
      const ssize_t got = read(touched[0], &ignored, 1);
      if (got == 0 || (got < 0 && errno != EINTR)) break;
      seen += got > 0 ? 1 : 0;
    }
    close(go[1]);
  }
  sleep_ms(hold_ms);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 4) return 2;
  const std::size_t bytes = static_cast<std::size_t>(std::atol(argv[1])) << 20;
  const long hold_ms = argc > 2 ? std::atol(argv[2]) : 0;
  const int processes = argc > 3 ? std::atoi(argv[3]) : 1;
  if (processes > 1 && (pipe(touched) != 0 || pipe(go) != 0)) return 4;
  for (int i = 1; i < processes; ++i) {
    const pid_t pid = fork();
    if (pid < 0) return 4;
    if (pid == 0) _exit(forked_one(bytes, hold_ms));
  }
  int status = first_one(bytes, hold_ms, processes - 1);
  for (int child_status; wait(&child_status) > 0;)
    if (!WIFEXITED(child_status) || WEXITSTATUS(child_status) != 0) status = 5;
  return status;
}
