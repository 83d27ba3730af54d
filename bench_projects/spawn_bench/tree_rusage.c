/* tree_rusage: runs a command and measures its whole process tree, including
 * processes that are not waited-for children of anyone (spawner processes that outlive
 * or are orphaned by the build driver).
 *
 * It makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so every orphaned
 * descendant is re-parented to it rather than to init, and reaps everything with wait4()
 * until ECHILD. A reaped process's rusage already includes the descendants it waited for
 * itself, and every other descendant ends up reaped here, so the sum counts each process
 * of the tree exactly once. Before reaping the command itself it reads the command's own
 * CPU (utime/stime of /proc/PID/stat, kept while it is a zombie), which separates the
 * build driver's CPU from that of its children.
 *
 * usage: tree_rusage OUT.json COMMAND [ARG...]
 * Writes {"wall_s", "user_s", "sys_s", "driver_user_s", "driver_sys_s", "max_rss_kb",
 * "processes_reaped", "orphans_reaped", "exit_status"} to OUT.json and exits with the
 * command's status. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char** environ;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double tv_s(struct timeval tv) { return (double)tv.tv_sec + (double)tv.tv_usec / 1e6; }

/* utime and stime (fields 14 and 15) of /proc/PID/stat, in seconds. */
static int read_own_cpu(pid_t pid, double* user, double* sys) {
  char path[64], buf[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char* p = strrchr(buf, ')'); /* the command name may hold spaces */
  if (!p) return -1;
  unsigned long long ut = 0, st = 0;
  /* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime */
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
    return -1;
  const double hz = (double)sysconf(_SC_CLK_TCK);
  *user = (double)ut / hz;
  *sys = (double)st / hz;
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s OUT.json COMMAND [ARG...]\n", argv[0]);
    return 2;
  }
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) {
    perror("tree_rusage: PR_SET_CHILD_SUBREAPER");
    return 125;
  }
  /* The build sees Ctrl-C through its own process group; we only wait. */
  signal(SIGINT, SIG_IGN);
  signal(SIGQUIT, SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all;
  sigfillset(&all);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

  const double start = now_s();
  pid_t main_pid;
  int rc = posix_spawnp(&main_pid, argv[2], NULL, &attr, argv + 2, environ);
  if (rc != 0) {
    fprintf(stderr, "tree_rusage: cannot run %s: %s\n", argv[2], strerror(rc));
    return 127;
  }

  double user = 0, sys = 0, driver_user = -1, driver_sys = -1, main_end = 0;
  long max_rss = 0, reaped = 0, orphans = 0;
  int main_status = 0;
  for (;;) {
    /* Peek first, so the driver's own CPU can be read while it is a zombie. */
    siginfo_t info;
    memset(&info, 0, sizeof info);
    if (waitid(P_ALL, 0, &info, WEXITED | WNOWAIT) != 0) {
      if (errno == EINTR) continue;
      break; /* ECHILD: the whole tree is gone */
    }
    if (info.si_pid == main_pid) read_own_cpu(main_pid, &driver_user, &driver_sys);
    int status;
    struct rusage ru;
    pid_t pid;
    while ((pid = wait4(info.si_pid, &status, 0, &ru)) < 0 && errno == EINTR) {
    }
    if (pid < 0) break;
    ++reaped;
    user += tv_s(ru.ru_utime);
    sys += tv_s(ru.ru_stime);
    if (ru.ru_maxrss > max_rss) max_rss = ru.ru_maxrss;
    if (pid == main_pid) {
      main_status = status;
      main_end = now_s();
    } else {
      ++orphans;
    }
  }
  const double end = now_s();

  FILE* out = fopen(argv[1], "w");
  if (!out) {
    perror("tree_rusage: output file");
    return 125;
  }
  const int code = WIFEXITED(main_status) ? WEXITSTATUS(main_status) : 128 + WTERMSIG(main_status);
  fprintf(out,
          "{\"wall_s\": %.6f, \"driver_wall_s\": %.6f, \"user_s\": %.6f, \"sys_s\": %.6f, "
          "\"driver_user_s\": %.6f, \"driver_sys_s\": %.6f, \"max_rss_kb\": %ld, "
          "\"processes_reaped\": %ld, \"orphans_reaped\": %ld, \"exit_status\": %d}\n",
          end - start, main_end - start, user, sys, driver_user, driver_sys, max_rss, reaped,
          orphans, code);
  fclose(out);
  return code;
}
