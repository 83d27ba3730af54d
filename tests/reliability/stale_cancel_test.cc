// A cancel must reach the command it was meant for or none: never the next command in
// the same slot (ctest: reliability.stale_cancel). Signals travel to a spawner as bytes
// on its lifeline and its watch thread may read them late, after the command ended and
// the next one started; before the fix, ~1% of the commands that followed a late
// cancel here were SIGKILLed. Also: cancels of running commands still land.
// Usage: stale_cancel_test SPAWNER [rounds]. Single-threaded but for the pool's threads.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "spawnpool/pool.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s SPAWNER [rounds]\n", argv[0]);
    return 2;
  }
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 1000;
  alarm(300);
  spawnpool::PoolOptions options;
  options.slots = 1;
  options.spawner_path = argv[1];
  spawnpool::Pool pool(options);
  spawnpool::Command quick, next, slow;
  quick.argv = {"/bin/true"};
  next.argv = {"/bin/sh", "-c", "exit 5"};
  slow.argv = {"/bin/sleep", "30"};

  int hit = 0;
  for (int i = 0; i < rounds; ++i) {
    spawnpool::Job job = pool.submit(quick);
    // About when /bin/true ends: the cancel is sent while it runs, or not at all.
    std::this_thread::sleep_for(std::chrono::microseconds(500 + (i % 8) * 250));
    pool.cancel(job, SIGKILL);
    pool.wait(job);
    const spawnpool::Result r = pool.run(next);
    if (r.returncode != 5) {
      ++hit;
      std::fprintf(stderr, "round %d: the next command got %d\n", i, r.returncode);
    }
  }
  int missed = 0;
  for (int i = 0; i < 5; ++i) {
    spawnpool::Job job = pool.submit(slow);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pool.cancel(job, SIGKILL);
    if (pool.wait(job).returncode != -SIGKILL) ++missed;
  }
  pool.close();
  std::printf("%d of %d commands hit by a cancel meant for the one before; "
              "%d of 5 cancels of a running command missed\n", hit, rounds, missed);
  return hit == 0 && missed == 0 ? 0 : 1;
}
