// spawn_floor: the cost floor of the spawn benchmark, a tiny C++ process (a few MiB of
// RSS) that runs posix_spawn + waitpid of PROG with no attributes or file actions.
//
// spawn_floor batch PROG THREADS MIN_COUNT BUDGET_MS MAX_COUNT
//   THREADS threads loop spawning until BUDGET_MS have passed and MIN_COUNT spawns are
//   done (or MAX_COUNT are). Prints one JSON object: spawn count, elapsed seconds, the
//   median and mean per-spawn latency in microseconds, and this process's CPU over the
//   measured loop.
// spawn_floor serve PROG
//   For each line read on stdin, spawns once and writes "LATENCY_NS CPU_NS" (wall time of
//   posix_spawn + waitpid, and this process's CPU over it); ends at EOF. Lets the
//   benchmark interleave the floor with other methods one command at a time.
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace {

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// This process's CPU, all threads: the user + sys total of getrusage(RUSAGE_SELF), read
// exactly (getrusage splits it from tick samples and can lag over a millisecond).
double cpu_s() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The same small environment the Python methods pass (SCons' default ENV is PATH only).
char env_path[] = "PATH=/usr/local/bin:/usr/bin:/bin";
char* envp[] = {env_path, nullptr};

void spawn_once(const char* prog) {
  char* argv[] = {const_cast<char*>(prog), nullptr};
  pid_t pid;
  const int rc = posix_spawn(&pid, prog, nullptr, nullptr, argv, envp);
  if (rc != 0) {
    std::fprintf(stderr, "spawn_floor: posix_spawn %s: %s\n", prog, std::strerror(rc));
    std::exit(1);
  }
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "spawn_floor: %s failed (status %d)\n", prog, status);
    std::exit(1);
  }
}

}  // namespace

int serve(const char* prog) {
  char line[64];
  while (std::fgets(line, sizeof line, stdin)) {
    const double c0 = cpu_s();
    const double t0 = now_s();
    spawn_once(prog);
    const double t1 = now_s();
    const double c1 = cpu_s();
    std::printf("%.0f %.0f\n", (t1 - t0) * 1e9, (c1 - c0) * 1e9);
    std::fflush(stdout);
  }
  return 0;
}

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "serve") == 0) return serve(argv[2]);
  if (argc != 7 || std::strcmp(argv[1], "batch") != 0) {
    std::fprintf(stderr,
                 "usage: %s batch PROG THREADS MIN_COUNT BUDGET_MS MAX_COUNT\n"
                 "       %s serve PROG\n", argv[0], argv[0]);
    return 2;
  }
  const char* prog = argv[2];
  const int threads = std::atoi(argv[3]);
  const long min_count = std::atol(argv[4]);
  const double budget = std::atof(argv[5]) / 1000.0;
  const long max_count = std::atol(argv[6]);

  for (int i = 0; i < 2; ++i) spawn_once(prog);  // warm the page cache and allocator

  std::atomic<long> done{0};
  std::atomic<bool> go{false};
  std::mutex mutex;
  std::vector<double> latencies;
  double start = 0, end = 0;
  double cpu_before = 0, cpu_after = 0;

  auto loop = [&] {
    while (!go.load()) {
    }
    std::vector<double> mine;
    for (;;) {
      const double t0 = now_s();
      spawn_once(prog);
      const double t1 = now_s();
      mine.push_back((t1 - t0) * 1e6);
      const long n = ++done;
      if (n >= max_count || (n >= min_count && t1 - start >= budget)) break;
    }
    const double t = now_s();
    std::lock_guard<std::mutex> lock(mutex);
    latencies.insert(latencies.end(), mine.begin(), mine.end());
    end = std::max(end, t);
  };

  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) pool.emplace_back(loop);
  cpu_before = cpu_s();
  start = now_s();
  go.store(true);
  for (auto& t : pool) t.join();
  cpu_after = cpu_s();

  std::sort(latencies.begin(), latencies.end());
  const std::size_t n = latencies.size();
  double sum = 0;
  for (double l : latencies) sum += l;
  const double median = n % 2 ? latencies[n / 2] : (latencies[n / 2 - 1] + latencies[n / 2]) / 2;
  std::printf(
      "{\"count\": %zu, \"elapsed_s\": %.6f, \"median_us\": %.3f, \"mean_us\": %.3f, "
      "\"driver_cpu_s\": %.6f}\n",
      n, end - start, median, sum / static_cast<double>(n), cpu_after - cpu_before);
  return 0;
}
