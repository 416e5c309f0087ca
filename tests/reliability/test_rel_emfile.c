/* Out of fds (hostile tester, after issue 12): with a low RLIMIT_NOFILE and
 * a burst of connections, accept failed with EMFILE, the listening socket
 * stayed readable, and the daemon spun on it, logging 13 M lines (412 MB)
 * in a minute at 80-90 % CPU, serving nobody. Now it pauses accepting for
 * a moment at a time, says so at most every 10 s, and serves the queued
 * clients once fds free up. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rel_util.h"
#include "test.h"

/* The daemon's own fds at start, pcached.lock's among them, plus a few. */
#define LIMIT 25
#define BURST 60

/* utime + stime of pid, in clock ticks. */
static long cpu_ticks(pid_t pid) {
  char path[64], buf[1024];
  long ut = 0, st = 0;
  FILE *f;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  f = fopen(path, "r");
  ASSERT_TRUE(f != NULL);
  ASSERT_TRUE(fgets(buf, sizeof buf, f) != NULL);
  fclose(f);
  /* Fields 14 and 15, after the ")" that ends the command name. */
  ASSERT_EQ(sscanf(strrchr(buf, ')') + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld",
                   &ut, &st),
            2);
  return ut + st;
}

int main(void) {
  struct rlimit old, low;
  test_env env;
  int fds[BURST], n = 0;
  long t0, t1, hz = sysconf(_SC_CLK_TCK);
  struct stat st;

  test_env_init(&env, "rel-emfile");
  wire_guard(&env);
  ASSERT_OK(getrlimit(RLIMIT_NOFILE, &old));
  low = old;
  low.rlim_cur = LIMIT;
  ASSERT_OK(setrlimit(RLIMIT_NOFILE, &low));
  test_daemon_start(&env, NULL);
  ASSERT_OK(setrlimit(RLIMIT_NOFILE, &old));

  for (int i = 0; i < BURST; i++) {
    int fd = test_raw_connect(&env);
    if (fd >= 0)
      fds[n++] = fd;
  }
  usleep(200 * 1000);
  t0 = cpu_ticks(env.daemon_pid);
  sleep(2);
  t1 = cpu_ticks(env.daemon_pid);
  ASSERT_EQ(stat(env.log_path, &st), 0);
  printf("%d connections against RLIMIT_NOFILE %d: daemon CPU %.2f s in 2 s, log %lld bytes\n", n,
         LIMIT, (double)(t1 - t0) / (double)hz, (long long)st.st_size);
  rel_figure("emfile_cpu_s_per_2s", "%.2f", (double)(t1 - t0) / (double)hz);
  rel_figure("emfile_log_bytes", "%lld", (long long)st.st_size);
  /* Spinning burnt nearly 2 s of CPU and megabytes of log here. */
  ASSERT_LT(t1 - t0, hz / 2);
  ASSERT_LT(st.st_size, 256 * 1024);

  /* fds free up: the daemon serves again. */
  for (int i = 0; i < n; i++)
    close(fds[i]);
  usleep(300 * 1000);
  close(wire_open(&env, "after"));
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
