/* An upload that can never be sent is dropped, not retried for ever
 * (issue 30, point 3). A pipeline whose description is larger than any
 * frame (a 65 MiB block of specialization data under a constant the
 * shader does not use: legal Vulkan) is built, then ordinary ones: every
 * ordinary one reaches the real pcached, the large one is counted in
 * upload_dropped and said once in the log, and the queue is empty after
 * the flush. Before the fix the large one went back to the front of the
 * queue on every try, so none behind it were uploaded and the flush timed
 * out. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_ORDINARY 6
/* Over PCACHE_DEFAULT_MAX_FRAME (64 MiB), which pcached keeps by default. */
#define HUGE_SPEC_BYTES ((size_t)65 << 20)

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static int dropped_lines;

static void capture(void *user_data, pcache_severity level, const char *message) {
  (void)user_data;
  (void)level;
  pthread_mutex_lock(&log_lock);
  if (strstr(message, "over pcached's request limit") && strstr(message, "--max-frame"))
    dropped_lines++;
  pthread_mutex_unlock(&log_lock);
}

int main(void) {
  test_env env;
  test_vk vk;
  pcache_client_options opts = PCACHE_STRUCT_INIT(pcache_client_options);
  pcache_client *client;
  pcache_device_info info;
  pcache_device *device;
  pcache_stats st;
  pcache_counters counters;
  test_objects o;
  test_graphics g;
  VkSpecializationMapEntry entries[2];
  uint8_t *data;
  VkPipeline p;

  opts.app_name = "pcache-client-test";
  opts.timeout_ms = 5000;
  opts.log_func = capture;
  opts.log_level = PCACHE_SEVERITY_WARNING;
  test_env_init(&env, "client-upload-drop");
  test_daemon_start(&env, NULL);
  test_vk_init(&vk);
  ASSERT_OK(pcache_client_open(&opts, &client));
  info = test_vk_device_info(&vk);
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&o, device);

  /* Variant 0's constant, then constant 99, which no shader declares, over
   * 65 MiB: the driver ignores it, the description carries it. */
  data = calloc(1, HUGE_SPEC_BYTES + sizeof(float));
  ASSERT_TRUE(data);
  test_graphics_info(&g, &o, 0);
  memcpy(data, &g.spec_value, sizeof(float));
  memset(data + sizeof(float), 0x5a, HUGE_SPEC_BYTES);
  entries[0] = g.spec_entry;
  entries[1] = (VkSpecializationMapEntry){
      .constantID = 99, .offset = sizeof(float), .size = HUGE_SPEC_BYTES};
  g.spec.mapEntryCount = 2;
  g.spec.pMapEntries = entries;
  g.spec.dataSize = HUGE_SPEC_BYTES + sizeof(float);
  g.spec.pData = data;
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  ASSERT_TRUE(p != VK_NULL_HANDLE);
  free(data);

  /* Variants 1..N: ordinary pipelines, queued behind it. */
  for (uint32_t i = 1; i <= N_ORDINARY; i++) {
    test_graphics_info(&g, &o, i);
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
    ASSERT_TRUE(p != VK_NULL_HANDLE);
  }
  ASSERT_OK(pcache_device_flush(device));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_OK(pcache_device_get_counters(device, &counters));
  ASSERT_EQ(st.compiles, N_ORDINARY + 1);
  ASSERT_EQ(st.uploaded, N_ORDINARY);
  ASSERT_EQ(st.upload_queue, 0);
  ASSERT_EQ(counters.upload_dropped, 1);
  ASSERT_EQ(util_count_entries(), N_ORDINARY);
  pthread_mutex_lock(&log_lock);
  ASSERT_EQ(dropped_lines, 1);
  pthread_mutex_unlock(&log_lock);

  test_objects_destroy(&o);
  pcache_device_destroy(device);
  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
