/* A state built again under a tier's claim after its pipeline was
 * released, while another thread holds the `built` table's lock: the
 * build must still find that the device cache holds the pipeline and
 * create it from there (no second miss, no compile, no upload), as it
 * does uncontended. A lookup that gave up on a busy lock (a trylock) took
 * the first-build path and compiled again. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "client/device.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

static pthread_mutex_t *built_lock;
static int holding;
static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *hold(void *arg) {
  struct timespec ts = {0, 200 * 1000 * 1000};
  (void)arg;
  pthread_mutex_lock(built_lock); /* what any other thread's insert or claim does for a moment */
  pthread_mutex_lock(&m);
  holding = 1;
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&m);
  nanosleep(&ts, NULL);
  pthread_mutex_unlock(built_lock);
  return NULL;
}

static pcache_stats run(const test_vk *vk, int contended) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  test_objects o;
  test_graphics g;
  pcache_stats st;
  VkPipeline a, b;
  pthread_t t;
  info.struct_size = sizeof info;
  info.pipeline_ownership = PCACHE_PIPELINES_SHARED;
  ASSERT_OK(pcache_device_create(NULL, &info, &device));
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 0);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &a));
  pcache_device_end_frame(device);
  ASSERT_OK(pcache_release_pipeline(device, a));
  if (contended) {
    built_lock = &device->build.built.lock;
    holding = 0;
    ASSERT_EQ(pthread_create(&t, NULL, hold, NULL), 0);
    pthread_mutex_lock(&m);
    while (!holding)
      pthread_cond_wait(&cv, &m);
    pthread_mutex_unlock(&m);
  }
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &b));
  if (contended)
    pthread_join(t, NULL);
  ASSERT_OK(pcache_device_get_stats(device, &st));
  fprintf(stderr, "%s: misses %llu compiles %llu\n", contended ? "contended" : "uncontended",
          (unsigned long long)st.misses, (unsigned long long)st.compiles);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
  return st;
}

int main(void) {
  test_vk vk;
  pcache_stats quiet, busy;
  test_vk_init(&vk);
  quiet = run(&vk, 0);
  busy = run(&vk, 1);
  ASSERT_EQ(quiet.compiles, 1);
  ASSERT_EQ(busy.compiles, quiet.compiles); /* the device cache holds it either way */
  ASSERT_EQ(busy.misses, quiet.misses);
  test_vk_fini(&vk);
  return 0;
}
