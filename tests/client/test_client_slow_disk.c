/* A daemon on a slow disk: every sync it makes takes 600 ms
 * (tests/common/slow_sync.c, preloaded into the real pcached), so each
 * acknowledged Put takes at least that long, over the client's 500 ms
 * timeout; and in part 2 a commit is held in flight (the shim's gate file)
 * while a second context works. What must hold (docs/client.md "Two
 * connections"):
 *   - uploads still land, none lost to a timeout: the daemon holds every
 *     pipeline after the flushes, and its put count equals them (a Put
 *     that timed out on the client and was sent again would count twice);
 *   - the app's own calls are never held behind an upload in flight: a
 *     second device context, created and used while a Put waits on the
 *     disk, gets every stored pipeline from the daemon and compiles none. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define TIMEOUT_MS 500
#define SYNC_MS "600"
#define N_FIRST 4
#define N_ALL 8

/* Creates (on) or removes the shim's gate file. */
static int gate_set(const char *path, int on) {
  FILE *f;
  if (!on)
    return unlink(path) == 0 ? 0 : -errno;
  if (!(f = fopen(path, "w")))
    return -errno;
  fclose(f);
  return 0;
}

static uint64_t daemon_puts(void) {
  Pcachepb__Response *resp = util_stats();
  uint64_t puts = resp->stats->puts;
  pcache__response_free(resp);
  return puts;
}

/* Flushes until every upload is acknowledged, for at most 20 s. */
static void flush_all(pcache_device *device) {
  uint64_t end = util_now_ms() + 20000;
  while (pcache_device_flush(device) != 0)
    ASSERT_LT(util_now_ms(), end);
}

int main(void) {
  test_env env;
  test_vk vk;
  pcache_device_info info;
  pcache_client *client;
  pcache_device *a, *b;
  test_objects oa, ob;
  pcache_stats st;
  char gate[400];

  test_env_init(&env, "client-slow-disk");
  /* The daemon alone runs on the slow disk. */
  setenv("PCACHE_TEST_SYNC_DELAY_MS", SYNC_MS, 1);
  snprintf(gate, sizeof gate, "%s/sync-gate", env.root);
  setenv("PCACHE_TEST_SYNC_GATE", gate, 1);
  test_daemon_start_preloaded(&env, PCACHE_TEST_SLOW_SYNC, NULL);

  test_vk_init(&vk);
  info = test_vk_device_info(&vk);
  client = util_client(TIMEOUT_MS);
  ASSERT_OK(pcache_device_create(client, &info, &a));
  test_objects_create(&oa, a);

  /* 1. Compiled and uploaded through the slow commits. */
  util_build_set(a, &oa, N_FIRST, 0, NULL);
  flush_all(a);
  ASSERT_OK(pcache_device_get_stats(a, &st));
  ASSERT_EQ(st.compiles, N_FIRST);
  ASSERT_EQ(st.uploaded, N_FIRST);
  ASSERT_EQ(util_count_entries(), N_FIRST);

  /* 2. New pipelines: their Put waits on the disk (held there by the
   * gate) while a second context is made and gets the stored ones. */
  ASSERT_OK(gate_set(gate, 1));
  for (uint32_t i = N_FIRST; i < N_ALL; i++) {
    test_graphics g;
    VkPipeline p;
    test_graphics_info(&g, &oa, i);
    ASSERT_VK(pcache_get_graphics_pipeline(a, &g.info, &p));
  }
  ASSERT_OK(pcache_device_create(client, &info, &b));
  test_objects_create(&ob, b);
  util_build_set(b, &ob, N_FIRST, 0, NULL);
  ASSERT_OK(pcache_device_get_stats(b, &st));
  ASSERT_EQ(st.compiles, 0);
  ASSERT_EQ(st.daemon_hits, N_FIRST);
  /* The test means something only if the upload was still waiting. */
  ASSERT_OK(pcache_device_get_stats(a, &st));
  ASSERT_GT(st.upload_queue, 0);
  ASSERT_TRUE(pcache_client_connected(client));
  ASSERT_OK(gate_set(gate, 0));

  /* 3. It lands, once. */
  flush_all(a);
  ASSERT_OK(pcache_device_get_stats(a, &st));
  ASSERT_EQ(st.compiles, N_ALL);
  ASSERT_EQ(st.uploaded, N_ALL);
  ASSERT_EQ(util_count_entries(), N_ALL);
  ASSERT_EQ(daemon_puts(), N_ALL);

  test_objects_destroy(&ob);
  pcache_device_destroy(b);
  test_objects_destroy(&oa);
  pcache_device_destroy(a);
  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  printf("test_client_slow_disk: ok\n");
  return 0;
}
