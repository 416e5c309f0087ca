/* Client resilience beyond tests/client/ (no_daemon, restart, timeout):
 * the daemon dies in the MIDDLE of a request. It is stopped (SIGSTOP) so
 * that the library's request is certainly in flight, then killed (SIGKILL)
 * while the app waits. Every call returns within the timeout, every
 * pipeline is created, and what was compiled meanwhile is uploaded once a
 * daemon is back. Repeated PCACHE_REL_CLIENT_ROUNDS times (3). */
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"
#include "wire.h"

#define TIMEOUT_MS 200
#define SLACK_MS 300

static test_env env;

typedef struct killer {
  pthread_t th;
  pid_t pid;
  unsigned delay_us;
} killer;

/* The library reconnects at most once a second (client.c): flush, each
 * call within the timeout, until the uploads are through. */
static void flush_until_done(pcache_device *device) {
  uint64_t start = util_now_ms();
  for (;;) {
    uint64_t t0 = util_now_ms();
    int rc = pcache_device_flush(device);
    ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
    if (rc == 0)
      return;
    ASSERT_LT(util_now_ms() - start, 10000);
    usleep(50000);
  }
}

static void *kill_later(void *arg) {
  killer *k = arg;
  usleep(k->delay_us);
  kill(k->pid, SIGKILL);
  return NULL;
}

static void kill_in(killer *k, unsigned delay_ms) {
  k->pid = env.daemon_pid;
  k->delay_us = delay_ms * 1000;
  ASSERT_EQ(pthread_create(&k->th, NULL, kill_later, k), 0);
}

static void reap(killer *k) {
  pthread_join(k->th, NULL);
  test_daemon_stop(&env, SIGKILL);
}

int main(void) {
  long rounds = 3;
  util_app a;
  pcache_stats st;
  VkPipeline p;
  uint32_t made = 0;
  const char *r = getenv("PCACHE_REL_CLIENT_ROUNDS");
  if (r && *r)
    rounds = atol(r);

  test_env_init(&env, "rel-client-kill");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  util_app_open(&a, TIMEOUT_MS);

  for (long round = 0; round < rounds; round++) {
    killer k;
    pcache_device *d2;
    uint64_t t0;
    int rc;

    /* 1. An upload in flight: the pipeline's Put goes to a stopped daemon,
     * flush waits for its reply, the daemon is killed under it. */
    test_daemon_pause(&env);
    for (int i = 0; i < 2; i++, made++) {
      test_graphics g;
      test_graphics_info(&g, &a.o, made);
      t0 = util_now_ms();
      ASSERT_VK(pcache_get_graphics_pipeline(a.device, &g.info, &p));
      ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
    }
    kill_in(&k, 30 + (unsigned)(round * 17) % 100);
    t0 = util_now_ms();
    rc = pcache_device_flush(a.device);
    ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
    ASSERT_TRUE(rc < 0); /* nothing can acknowledge it */
    reap(&k);

    /* 2. A device context's prefetch in flight when the daemon dies. */
    test_daemon_start(&env, NULL);
    flush_until_done(a.device); /* reconnects, uploads resume */
    test_daemon_pause(&env);
    kill_in(&k, 20 + (unsigned)(round * 29) % 100);
    t0 = util_now_ms();
    ASSERT_OK(pcache_device_create(a.client, &a.info, &d2));
    ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
    reap(&k);
    pcache_device_destroy(d2);

    /* 3. Pipelines while no daemon runs at all, then back. */
    for (int i = 0; i < 2; i++, made++) {
      test_compute c;
      test_compute_info(&c, &a.o, made);
      t0 = util_now_ms();
      ASSERT_VK(pcache_get_compute_pipeline(a.device, &c.info, &p));
      ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
    }
    test_daemon_start(&env, NULL);
    flush_until_done(a.device);
    ASSERT_OK(pcache_device_get_stats(a.device, &st));
    ASSERT_EQ(st.compiles, made);
    ASSERT_EQ(st.upload_queue, 0);
    ASSERT_EQ(st.uploaded, made);
    printf("round %ld: %u pipelines created and uploaded across 2 mid-request kills\n",
           round + 1, made);
  }
  ASSERT_EQ(util_count_entries(), made);

  util_app_close(&a);
  test_env_cleanup(&env);
  return 0;
}
