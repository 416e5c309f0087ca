/* Prefetch beyond one reply and beyond the timeout. With a daemon limited
 * to 3 items a reply, a warm device still gets all 8 blobs through pages
 * (skipped when the daemon does not page yet). With the daemon stopped
 * while a device is created, the prefetch gives up in time, and the upload
 * thread fetches and merges the blobs once the daemon is back, so the
 * pipelines then come from the daemon, not the compiler. Destroying a
 * device while a background page is in flight returns within the timeout. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/clock.h"
#include "proto/transport.h"
#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_GRAPHICS 6
#define N_COMPUTE 2
#define N_PIPELINES (N_GRAPHICS + N_COMPUTE)
#define TIMEOUT_MS 100
#define SLACK_MS 250

/* Whether the daemon pages: a second page (offset 3) of a 3-per-reply
 * prefetch holds other entries, and the first says more follow. */
static int daemon_pages(const pcache_device_info *info, const test_vk *vk) {
  pcache__transport *t;
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pre = PCACHEPB__PREFETCH__INIT;
  pcache__reply reply = {0};
  uint8_t key[32];
  int more;
  (void)info;
  /* The device key as libpcache makes it (common/devkey.h). */
  memcpy(key, vk->props.pipelineCacheUUID, 16);
  for (int i = 0; i < 4; i++) {
    uint32_t v[4] = {vk->props.vendorID, vk->props.deviceID, vk->props.driverVersion,
                     (uint32_t)sizeof(void *)};
    for (int b = 0; b < 4; b++)
      key[16 + i * 4 + b] = (uint8_t)(v[i] >> (8 * b));
  }
  ASSERT_OK(pcache__transport_open(getenv("PCACHE_SOCKET"), "pcache-client-test", 5000, &t,
                                   NULL));
  pre.device_key.data = key;
  pre.device_key.len = sizeof key;
  request.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  request.prefetch = &pre;
  ASSERT_OK(pcache__transport_rpc(t, &request, PCACHEPB__RESPONSE__BODY_PREFETCH,
                                  pcache__mono_ms() + 5000, &reply));
  ASSERT_EQ(reply.response->prefetch->n_blobs, 3);
  more = reply.response->prefetch->more;
  pcache__reply_release(&reply);
  if (more) {
    /* The contract the client's paging relies on: the next page holds
     * other entries. */
    Pcachepb__Request again = request;
    Pcachepb__Prefetch pre2 = pre;
    uint8_t first[3][16];
    pre2.offset = 0;
    again.prefetch = &pre2;
    ASSERT_OK(pcache__transport_rpc(t, &again, PCACHEPB__RESPONSE__BODY_PREFETCH,
                                    pcache__mono_ms() + 5000, &reply));
    for (int i = 0; i < 3; i++)
      memcpy(first[i], reply.response->prefetch->blobs[i]->state_hash.data, 16);
    pcache__reply_release(&reply);
    pre2.offset = 3;
    ASSERT_OK(pcache__transport_rpc(t, &again, PCACHEPB__RESPONSE__BODY_PREFETCH,
                                    pcache__mono_ms() + 5000, &reply));
    ASSERT_EQ(reply.response->prefetch->n_blobs, 3);
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        ASSERT_TRUE(memcmp(first[j], reply.response->prefetch->blobs[i]->state_hash.data, 16));
    pcache__reply_release(&reply);
  }
  pcache__transport_close(t);
  return more;
}

/* The set on a's device once its prefetch is in: every pipeline a daemon
 * hit, none compiled; then its objects and the device go. */
static void build_warm(util_app *a) {
  pcache_stats st;
  test_objects_create(&a->o, a->device);
  util_build_set(a->device, &a->o, N_GRAPHICS, N_COMPUTE, NULL);
  ASSERT_OK(pcache_device_get_stats(a->device, &st));
  ASSERT_EQ(st.compiles, 0);
  ASSERT_EQ(st.daemon_hits, N_PIPELINES);
  ASSERT_EQ(st.rejected_blobs, 0);
  test_objects_destroy(&a->o);
  pcache_device_destroy(a->device);
}

int main(void) {
  const char *args[] = {"--max-hashes", "3", NULL};
  test_env env;
  util_app a;
  pcache_stats st;
  uint64_t t0;

  test_env_init(&env, "client-prefetch");
  test_daemon_start(&env, args);

  /* Cold: compile and upload everything. */
  util_app_open(&a, 5000);
  util_build_set(a.device, &a.o, N_GRAPHICS, N_COMPUTE, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.uploaded, N_PIPELINES);
  test_objects_destroy(&a.o);
  pcache_device_destroy(a.device);

  /* 1. Pages within the timeout. */
  if (daemon_pages(&a.info, &a.vk)) {
    ASSERT_OK(pcache_device_create(a.client, &a.info, &a.device));
    ASSERT_OK(pcache_device_get_stats(a.device, &st));
    ASSERT_EQ(st.prefetched, N_PIPELINES);
    build_warm(&a);
  } else {
    fprintf(stderr, "SKIP part 1: the daemon does not page prefetch replies yet\n");
  }
  pcache_client_close(a.client);

  /* 2. The daemon stops answering: creation gives up in time, the rest
   * comes in the background once it answers again. */
  a.client = util_client(TIMEOUT_MS);
  ASSERT_TRUE(pcache_client_connected(a.client));
  test_daemon_pause(&env);
  t0 = util_now_ms();
  ASSERT_OK(pcache_device_create(a.client, &a.info, &a.device));
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.prefetched, 0);
  kill(env.daemon_pid, SIGCONT);
  t0 = util_now_ms();
  while (st.prefetched < N_PIPELINES && util_now_ms() - t0 < 8000) {
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
    ASSERT_OK(pcache_device_get_stats(a.device, &st));
  }
  ASSERT_EQ(st.prefetched, N_PIPELINES);
  build_warm(&a);

  /* 3. Destroy while the upload thread is in a background page call (it
   * has ten times the timeout): the call is cancelled, not waited out. The
   * thread retries after the client's one-second reconnect pause, so at
   * 1.3 s it is inside a call that could last until 2 s. */
  test_daemon_pause(&env);
  ASSERT_OK(pcache_device_create(a.client, &a.info, &a.device));
  {
    struct timespec ts = {1, 300 * 1000000L};
    nanosleep(&ts, NULL);
  }
  t0 = util_now_ms();
  pcache_device_destroy(a.device);
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  kill(env.daemon_pid, SIGCONT);

  pcache_client_close(a.client);
  test_vk_fini(&a.vk);
  test_env_cleanup(&env);
  return 0;
}
