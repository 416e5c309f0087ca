/* 8 threads ask for the same and different pipelines at once, through
 * both paths, while the main thread ends frames: every thread gets the same
 * VkPipeline for a state, and each state is compiled exactly once. Built
 * under TSan too (PCACHE_SANITIZE=thread). */
#include <pthread.h>
#include <stdatomic.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_THREADS 8
#define N_GRAPHICS 6
#define N_COMPUTE 2
#define N_STATES (N_GRAPHICS + N_COMPUTE)
#define ROUNDS 4

typedef struct worker {
  pthread_t thread;
  int index;
  pcache_device *device;
  const test_objects *objects;
  pthread_barrier_t *start;
  VkPipeline got[N_STATES];
} worker;

static atomic_int done;

static void *work(void *arg) {
  worker *w = arg;
  pcache_tier *tier;
  ASSERT_OK(pcache_device_select_tier(w->device, 1 + (uint64_t)(w->index % 2), &tier));
  pthread_barrier_wait(w->start);
  for (int round = 0; round < ROUNDS; round++) {
    for (int k = 0; k < N_STATES; k++) {
      /* Each thread walks the states from its own starting point. */
      int s = (k + w->index * 3) % N_STATES;
      int by_key = (round + w->index) % 2;
      VkPipeline p;
      if (s < N_GRAPHICS) {
        test_graphics g;
        test_graphics_info(&g, w->objects, (uint32_t)s);
        ASSERT_VK(by_key ? pcache_tier_get_graphics_pipeline(tier, (uint64_t)s, &g.info, &p)
                         : pcache_get_graphics_pipeline(w->device, &g.info, &p));
      } else {
        test_compute c;
        test_compute_info(&c, w->objects, (uint32_t)s);
        ASSERT_VK(by_key ? pcache_tier_get_compute_pipeline(tier, (uint64_t)s, &c.info, &p)
                         : pcache_get_compute_pipeline(w->device, &c.info, &p));
      }
      ASSERT_TRUE(p != VK_NULL_HANDLE);
      if (w->got[s] == VK_NULL_HANDLE)
        w->got[s] = p;
      ASSERT_TRUE(w->got[s] == p);
      if (by_key) {
        /* One lookup: two could see "not published yet" and then p. */
        VkPipeline seen = pcache_tier_lookup(tier, (uint64_t)s);
        ASSERT_TRUE(seen == p || seen == VK_NULL_HANDLE);
      }
    }
  }
  atomic_fetch_add(&done, 1);
  return NULL;
}

int main(void) {
  test_env env;
  util_app a;
  pcache_stats st;
  pthread_barrier_t start;
  worker workers[N_THREADS] = {0};

  test_env_init(&env, "client-threads");
  test_daemon_start(&env, NULL);
  util_app_open(&a, 5000);

  pthread_barrier_init(&start, NULL, N_THREADS + 1);
  for (int i = 0; i < N_THREADS; i++) {
    workers[i].index = i;
    workers[i].device = a.device;
    workers[i].objects = &a.o;
    workers[i].start = &start;
    ASSERT_EQ(pthread_create(&workers[i].thread, NULL, work, &workers[i]), 0);
  }
  pthread_barrier_wait(&start);
  while (atomic_load(&done) < N_THREADS)
    pcache_device_end_frame(a.device); /* publishing races the lookups */
  for (int i = 0; i < N_THREADS; i++)
    pthread_join(workers[i].thread, NULL);
  pthread_barrier_destroy(&start);

  for (int i = 1; i < N_THREADS; i++)
    ASSERT_MEMEQ(workers[i].got, workers[0].got, sizeof workers[0].got);
  for (int s = 0; s < N_STATES; s++)
    for (int t = 0; t < s; t++)
      ASSERT_TRUE(workers[0].got[s] != workers[0].got[t]);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.compiles, N_STATES);
  ASSERT_EQ(st.misses, N_STATES);
  ASSERT_EQ(st.pipelines, N_STATES);
  ASSERT_EQ(st.uploaded, N_STATES);
  /* Every get is one hit or one miss (lookups add app-key hits). */
  ASSERT_GE(st.hits_app_key + st.hits_create_info + st.misses,
            (uint64_t)N_THREADS * ROUNDS * N_STATES);
  ASSERT_EQ(util_count_entries(), N_STATES);

  util_app_close(&a);
  test_env_cleanup(&env);
  return 0;
}
