/* The hit paths write nothing shared: counters are per-thread shards and
 * the object map is read without a lock. Checks that the sums are exact
 * with 8 threads hitting both paths; that lookups stay right while another
 * thread creates and destroys objects (the map's tables are replaced and
 * freed under the readers: ASan and TSan builds watch); and that a handle
 * value reused after a destroy is described by its new content. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_THREADS 8
#define N_HITS 2000
#define N_CHURN 1500

typedef struct worker {
  pthread_t thread;
  pcache_device *device;
  const test_objects *objects;
  pcache_tier *tier;
  VkPipeline expect_key, expect_info;
  pthread_barrier_t *start;
  atomic_int *stop; /* NULL: N_HITS rounds; else until set */
  _Atomic uint64_t rounds;
} worker;

static void *hit(void *arg) {
  worker *w = arg;
  test_graphics g;
  test_graphics_info(&g, w->objects, 0);
  pthread_barrier_wait(w->start);
  for (atomic_store(&w->rounds, 0); w->stop ? !atomic_load(w->stop) : w->rounds < N_HITS;
       atomic_fetch_add(&w->rounds, 1)) {
    VkPipeline p;
    ASSERT_TRUE(pcache_tier_lookup(w->tier, 7) == w->expect_key);
    ASSERT_VK(pcache_get_graphics_pipeline(w->device, &g.info, &p));
    ASSERT_TRUE(p == w->expect_info);
  }
  return NULL;
}

static void run_workers(worker *workers, int n, pthread_barrier_t *start) {
  for (int i = 0; i < n; i++)
    ASSERT_EQ(pthread_create(&workers[i].thread, NULL, hit, &workers[i]), 0);
  pthread_barrier_wait(start);
}

/* tri.frag with another SPIR-V generator word: the same shader to the
 * driver, a different content hash to pcache. */
static VkShaderModule frag_variant(pcache_device *device, uint32_t generator) {
  size_t size;
  const uint32_t *code = test_vk_shader_code("tri.frag", &size);
  uint32_t *copy = malloc(size);
  VkShaderModuleCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = size};
  VkShaderModule m;
  ASSERT_TRUE(copy != NULL);
  memcpy(copy, code, size);
  copy[2] = generator;
  ci.pCode = copy;
  ASSERT_VK(pcache_create_shader_module(device, &ci, NULL, &m));
  free(copy);
  return m;
}

int main(void) {
  test_env env;
  util_app a;
  pcache_stats st0, st;
  pthread_barrier_t start;
  worker workers[N_THREADS] = {0};
  atomic_int stop = 0;
  pcache_tier *tier;
  test_graphics g;
  VkPipeline by_key, by_info, p1, p2;
  VkShaderModule m1, m2;
  uint64_t h1, h2;

  test_env_init(&env, "client-shards");
  test_daemon_start(&env, NULL);
  util_app_open(&a, 5000);
  ASSERT_OK(pcache_device_select_tier(a.device, 1, &tier));
  test_graphics_info(&g, &a.o, 0);
  ASSERT_VK(pcache_tier_get_graphics_pipeline(tier, 7, &g.info, &by_key));
  ASSERT_VK(pcache_get_graphics_pipeline(a.device, &g.info, &by_info));
  ASSERT_TRUE(by_key == by_info); /* same state */
  pcache_device_end_frame(a.device);

  /* 1. Exact sums over the shards. */
  ASSERT_OK(pcache_device_get_stats(a.device, &st0));
  pthread_barrier_init(&start, NULL, N_THREADS + 1);
  for (int i = 0; i < N_THREADS; i++)
    workers[i] = (worker){.device = a.device,
                          .objects = &a.o,
                          .tier = tier,
                          .expect_key = by_key,
                          .expect_info = by_info,
                          .start = &start};
  run_workers(workers, N_THREADS, &start);
  for (int i = 0; i < N_THREADS; i++)
    pthread_join(workers[i].thread, NULL);
  pthread_barrier_destroy(&start);
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.hits_app_key - st0.hits_app_key, (uint64_t)N_THREADS * N_HITS);
  ASSERT_EQ(st.hits_create_info - st0.hits_create_info, (uint64_t)N_THREADS * N_HITS);
  ASSERT_EQ(st.misses, st0.misses);

  /* 2. Hits while the map churns: each create or destroy writes the map,
   * every ~30 of them it is rebuilt and the old table freed. */
  pthread_barrier_init(&start, NULL, 3);
  for (int i = 0; i < 2; i++)
    workers[i] = (worker){.device = a.device,
                          .objects = &a.o,
                          .tier = tier,
                          .expect_key = by_key,
                          .expect_info = by_info,
                          .start = &start,
                          .stop = &stop};
  run_workers(workers, 2, &start);
  /* Churn until both readers have run alongside it for a while: on a
   * loaded machine the churn alone can finish before they are scheduled. */
  for (int i = 0; i < N_CHURN || atomic_load(&workers[0].rounds) < 100 ||
                  atomic_load(&workers[1].rounds) < 100;
       i++) {
    ASSERT_LT(i, 100 * N_CHURN); /* the readers are stuck, not slow */
    VkSamplerCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
                               .maxLod = (float)(i % 8)};
    VkSampler samplers[4];
    for (int k = 0; k < 4; k++)
      ASSERT_VK(pcache_create_sampler(a.device, &sci, NULL, &samplers[k]));
    for (int k = 0; k < 4; k++)
      pcache_destroy_sampler(a.device, samplers[k], NULL);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++) {
    pthread_join(workers[i].thread, NULL);
    ASSERT_GT(workers[i].rounds, 0);
  }
  pthread_barrier_destroy(&start);

  /* 3. Destroyed objects leave the map: a handle value the driver hands
   * out again names the new content, not the old. */
  ASSERT_OK(pcache_device_get_stats(a.device, &st0));
  m1 = frag_variant(a.device, 0x70636101);
  h1 = (uint64_t)(uintptr_t)m1;
  g.stages[1].module = m1;
  ASSERT_VK(pcache_get_graphics_pipeline(a.device, &g.info, &p1));
  pcache_destroy_shader_module(a.device, m1, NULL);
  m2 = frag_variant(a.device, 0x70636102);
  h2 = (uint64_t)(uintptr_t)m2;
  g.stages[1].module = m2;
  ASSERT_VK(pcache_get_graphics_pipeline(a.device, &g.info, &p2));
  ASSERT_TRUE(p1 != p2);
  ASSERT_TRUE(p1 != by_info && p2 != by_info);
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.misses - st0.misses, 2);
  ASSERT_EQ(st.unhashable, st0.unhashable);
  fprintf(stderr, "handle reused after destroy: %s\n", h1 == h2 ? "yes" : "no (checked less)");
  pcache_destroy_shader_module(a.device, m2, NULL);

  util_app_close(&a);
  test_env_cleanup(&env);
  return 0;
}
