/* Cold run: every pipeline is compiled and uploaded. Warm run, in a new
 * process: the prefetch brings every blob back, so nothing is compiled.
 * Warm run without prefetch (PCACHE_NO_PREFETCH=1) and without the
 * shared-memory segment (PCACHE_NO_SEGMENT=1, whose snapshot would serve
 * every miss: test_client_segment): each miss fetches its own blob with
 * one Get, through the connection's reply window, and still nothing is
 * compiled; with PCACHE_NO_WINDOW=1 the same through the socket. */
#include <stdlib.h>
#include <signal.h>
#include <string.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_GRAPHICS 6
#define N_COMPUTE 2
#define N_PIPELINES (N_GRAPHICS + N_COMPUTE)

/* One process's run; cold or warm decides what the counters must say. */
static void run(int warm) {
  util_app a;
  VkPipeline first[N_PIPELINES], again[N_PIPELINES];
  pcache_stats st;

  util_app_open(&a, 5000);
  ASSERT_TRUE(pcache_client_connected(a.client));
  util_build_set(a.device, &a.o, N_GRAPHICS, N_COMPUTE, first);
  for (int i = 0; i < N_PIPELINES; i++)
    for (int j = 0; j < i; j++)
      ASSERT_TRUE(first[i] != first[j]);
  util_build_set(a.device, &a.o, N_GRAPHICS, N_COMPUTE, again);
  ASSERT_MEMEQ(first, again, sizeof first);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.misses, N_PIPELINES);
  ASSERT_EQ(st.hits_create_info, N_PIPELINES);
  ASSERT_EQ(st.pipelines, N_PIPELINES);
  ASSERT_EQ(st.unhashable, 0);
  ASSERT_EQ(st.rejected_blobs, 0);
  ASSERT_EQ(st.upload_queue, 0);
  if (!warm) {
    ASSERT_EQ(st.compiles, N_PIPELINES);
    ASSERT_EQ(st.daemon_hits, 0);
    ASSERT_EQ(st.prefetched, 0);
    ASSERT_EQ(st.uploaded, N_PIPELINES);
  } else if (getenv("PCACHE_NO_PREFETCH")) {
    ASSERT_EQ(st.prefetched, 0);
    ASSERT_EQ(st.daemon_hits, N_PIPELINES);
    ASSERT_EQ(st.compiles, 0);
    ASSERT_EQ(st.uploaded, 0);
  } else {
    ASSERT_EQ(st.prefetched, N_PIPELINES);
    ASSERT_EQ(st.daemon_hits, N_PIPELINES);
    ASSERT_EQ(st.compiles, 0);
    ASSERT_EQ(st.uploaded, 0);
  }
  util_app_close(&a);
}

int main(int argc, char **argv) {
  test_env env;
  uint64_t windowed;
  if (argc > 1 && strcmp(argv[1], "warm") == 0) {
    run(1); /* the parent's environment names its daemon */
    return 0;
  }
  test_env_init(&env, "client-warm");
  test_daemon_start(&env, NULL);
  run(0);
  ASSERT_EQ(util_count_entries(), N_PIPELINES);
  util_run_self(argv[0], "warm");
  setenv("PCACHE_NO_PREFETCH", "1", 1);
  setenv("PCACHE_NO_SEGMENT", "1", 1);
  windowed = util_window_replies();
  util_run_self(argv[0], "warm");
  ASSERT_EQ(util_window_replies() - windowed, N_PIPELINES);
  setenv("PCACHE_NO_WINDOW", "1", 1);
  util_run_self(argv[0], "warm");
  ASSERT_EQ(util_window_replies() - windowed, N_PIPELINES);
  unsetenv("PCACHE_NO_WINDOW");
  unsetenv("PCACHE_NO_SEGMENT");
  unsetenv("PCACHE_NO_PREFETCH");
  /* A restarted daemon serves the same entries from disk. */
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM) & 0x7f, 0);
  test_daemon_start(&env, NULL);
  util_run_self(argv[0], "warm");
  ASSERT_EQ(util_count_entries(), N_PIPELINES);
  test_env_cleanup(&env);
  return 0;
}
