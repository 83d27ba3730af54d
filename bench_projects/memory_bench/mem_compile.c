/* mem_compile: a stand-in "compiler" with a chosen memory peak, for the memory benchmark.
 *
 * usage: mem_compile MIB HOLD_MS OUTPUT [INPUT...]
 *
 * Reads every INPUT (as a compiler reads its sources), maps MIB MiB of anonymous memory
 * (huge pages requested) and writes one byte into every page of it, so the whole size is
 * resident and charged to the process's memory cgroup. It then sleeps HOLD_MS milliseconds
 * holding that memory (a sleeping "compile" lets -j8 pay off on a 2-CPU machine while
 * memory stays the limit), reads the bytes back, and writes OUTPUT through a temporary
 * file and rename(), so a process killed at any point (the OOM killer) leaves no output,
 * never a partial one.
 *
 * OUTPUT depends only on the arguments, the inputs' bytes and the page size (the Python
 * mirror is memory_tree.expected_output):
 *   mem_compile v1
 *   target OUTPUT
 *   mib MIB
 *   hold_ms HOLD_MS
 *   inputs COUNT FNV        FNV-1a 64 over each input's bytes followed by one 0 byte
 *   pages PAGES checksum SUM    SUM of the byte written into page i, (i*131+7) & 0xff
 *
 * Exit status: 0 done, 2 usage, 3 the memory could not be mapped, 4 an input could not be
 * read, 5 the output could not be written. Single-threaded; prints only on errors. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const uint64_t kFnvOffset = 0xcbf29ce484222325ULL;
static const uint64_t kFnvPrime = 0x100000001b3ULL;

static int parse_count(const char* text, long max, long* value) {
  char* end = NULL;
  errno = 0;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < 0 || v > max) return -1;
  *value = v;
  return 0;
}

static uint64_t fnv_bytes(uint64_t h, const unsigned char* p, size_t n) {
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

/* Folds one input file into the hash; -1 if it cannot be read. */
static int hash_input(const char* path, uint64_t* h) {
  FILE* f = fopen(path, "rb");
  if (!f) return -1;
  unsigned char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) *h = fnv_bytes(*h, buf, n);
  const int failed = ferror(f);
  fclose(f);
  if (failed) return -1;
  const unsigned char separator = 0;
  *h = fnv_bytes(*h, &separator, 1);
  return 0;
}

/* Sleeps until a deadline on the monotonic clock, so a signal cannot shorten the hold. */
static void hold_for(long ms) {
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  deadline.tv_sec += ms / 1000;
  deadline.tv_nsec += (ms % 1000) * 1000000L;
  if (deadline.tv_nsec >= 1000000000L) {
    deadline.tv_sec += 1;
    deadline.tv_nsec -= 1000000000L;
  }
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &deadline, NULL) == EINTR) {
  }
}

static int write_output(const char* path, const char* text) {
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
    return -1;
  FILE* f = fopen(tmp, "w");
  if (!f) return -1;
  const int write_failed = fputs(text, f) < 0;
  if (fclose(f) != 0 || write_failed || rename(tmp, path) != 0) {
    unlink(tmp);
    return -1;
  }
  return 0;
}

int main(int argc, char** argv) {
  long mib = 0, hold_ms = 0;
  if (argc < 4 || parse_count(argv[1], 1L << 20, &mib) != 0 ||
      parse_count(argv[2], 24L * 3600 * 1000, &hold_ms) != 0) {
    fprintf(stderr, "usage: mem_compile MIB HOLD_MS OUTPUT [INPUT...]\n");
    return 2;
  }
  const char* output = argv[3];

  uint64_t inputs_hash = kFnvOffset;
  for (int i = 4; i < argc; ++i) {
    if (hash_input(argv[i], &inputs_hash) != 0) {
      fprintf(stderr, "mem_compile: cannot read %s: %s\n", argv[i], strerror(errno));
      return 4;
    }
  }

  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  const size_t bytes = (size_t)mib << 20;
  const size_t pages = bytes / page;
  unsigned char* memory = NULL;
  if (bytes > 0) {
    memory = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
      fprintf(stderr, "mem_compile: cannot map %ld MiB: %s\n", mib, strerror(errno));
      return 3;
    }
  }
  /* Huge pages where the kernel offers them (THP "madvise" here): a 4 KiB fault per page
   * would cost ~0.6 s of CPU per GiB, and the benchmark's compiles must leave the 2 CPUs
   * mostly idle; the memory charged is the same. Failure (THP off) only costs speed. */
  if (bytes > 0) madvise(memory, bytes, MADV_HUGEPAGE);
  for (size_t i = 0; i < pages; ++i) memory[i * page] = (unsigned char)((i * 131 + 7) & 0xff);

  hold_for(hold_ms);

  /* Reading back proves the memory was held to the end (and keeps the writes alive). */
  uint64_t checksum = 0;
  for (size_t i = 0; i < pages; ++i) checksum += ((volatile unsigned char*)memory)[i * page];

  char text[8192];
  snprintf(text, sizeof text,
           "mem_compile v1\ntarget %s\nmib %ld\nhold_ms %ld\ninputs %d %016llx\n"
           "pages %zu checksum %llu\n",
           output, mib, hold_ms, argc - 4, (unsigned long long)inputs_hash, pages,
           (unsigned long long)checksum);
  if (write_output(output, text) != 0) {
    fprintf(stderr, "mem_compile: cannot write %s: %s\n", output, strerror(errno));
    return 5;
  }
  return 0;
}
