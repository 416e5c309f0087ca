/* --busy-poll-us: an I/O thread that served a request polls a while for
 * the next instead of sleeping (daemon/net/workers.c). What must hold is that
 * it stops: after a burst of Gets the daemon, left alone, uses next to no
 * CPU (a spin that never stopped would burn a whole core). A long window
 * (10 ms) makes the spin itself visible too: the burst costs CPU time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

/* The daemon's user + system CPU time, in clock ticks. */
static unsigned long long cpu_ticks(pid_t pid) {
  char path[64], buf[1024], *p;
  unsigned long long utime = 0, stime = 0;
  FILE *f;
  size_t n;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  f = fopen(path, "r");
  ASSERT_TRUE(f != NULL);
  n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  /* After the command name, which may hold spaces: fields 3.. */
  p = strrchr(buf, ')');
  ASSERT_TRUE(p != NULL);
  ASSERT_EQ(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime),
            2);
  return utime + stime;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(void) {
  static const char *const args[] = {"--busy-poll-us", "10000", "--threads", "2", NULL};
  long hz = sysconf(_SC_CLK_TCK);
  unsigned long long before, after;
  pcache__devkey key;
  wire_item items[4];
  pcache__hash hashes[4];
  wire_reply rep;
  test_env env;
  int fd;

  test_env_init(&env, "busy-poll");
  wire_guard(&env);
  wire_devkey(3, &key);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "busy-poll");
  for (unsigned i = 0; i < 4; i++) {
    wire_item_make(&items[i], &key, 1 + i, 20480);
    hashes[i] = items[i].hash;
  }
  wire_put(fd, &key, items, 4, &rep);
  wire_reply_free(&rep);

  /* A Get every 5 ms for a second: each lands in the last one's 10 ms
   * window, so the thread polls the whole second. */
  before = cpu_ticks(env.daemon_pid);
  for (int i = 0; i < 200; i++) {
    wire_get(fd, &key, hashes, 4, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->get->n_blobs, 4);
    wire_reply_free(&rep);
    sleep_ms(5);
  }
  after = cpu_ticks(env.daemon_pid);
  printf("busy: %llu ticks of %ld a second\n", after - before, hz);

  /* Left alone: past the window the thread sleeps in epoll again. */
  sleep_ms(200);
  before = cpu_ticks(env.daemon_pid);
  sleep_ms(1000);
  after = cpu_ticks(env.daemon_pid);
  printf("idle: %llu ticks of %ld a second\n", after - before, hz);
  ASSERT_LT(after - before, (unsigned long long)(hz / 10 + 1));

  close(fd);
  for (unsigned i = 0; i < 4; i++)
    wire_item_free(&items[i]);
  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
