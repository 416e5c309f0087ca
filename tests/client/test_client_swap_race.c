/* A fast-linked pipeline's optimization swapped in by an end_frame on
 * another thread while the building thread is between owning the linked
 * pipeline and completing the tier's entry: the tier must map the state
 * to a pipeline the owned set finds it under, so that releasing what the
 * call returned makes the tier forget it and the next request never hands
 * out a destroyed handle. Played on one thread: the test links with
 * -Wl,--wrap=pcache__fastlink_submit, and the wrapper waits for the
 * optimization and runs pcache_device_end_frame right after the job is
 * queued, inside that window. */
#include <stdio.h>
#include <string.h>

#include "client/device.h"
#include "client/fastlink.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define H(p) ((long long)pcache__pipeline_to_u64(p))

static int armed;

void __real_pcache__fastlink_submit(pcache_device *d, pcache__fastlink_job *j, VkPipeline linked);
void __wrap_pcache__fastlink_submit(pcache_device *d, pcache__fastlink_job *j, VkPipeline linked);
void __wrap_pcache__fastlink_submit(pcache_device *d, pcache__fastlink_job *j, VkPipeline linked) {
  __real_pcache__fastlink_submit(d, j, linked);
  if (armed && j) {
    armed = 0;
    /* "Another thread" finishes the optimization and ends the frame now. */
    pcache__fastlink_wait(d);
    pcache_device_end_frame(d);
  }
}

int main(void) {
  test_vk vk;
  pcache_device_info info;
  pcache_device *device;
  test_objects o;
  test_graphics g;
  pcache_counters c;
  VkPipeline first, second, third;
  if (!test_vk_init_gpl(&vk)) {
    fprintf(stderr, "no VK_EXT_graphics_pipeline_library: skipped\n");
    return 77;
  }
  info = test_vk_device_info(&vk);
  info.struct_size = sizeof info;
  info.fast_link = PCACHE_FAST_LINK_THEN_OPTIMIZE;
  info.pipeline_ownership = PCACHE_PIPELINES_SHARED;
  ASSERT_OK(pcache_device_create(NULL, &info, &device));
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 0);

  armed = 1;
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &first));
  ASSERT_OK(pcache_device_get_counters(device, &c));
  fprintf(stderr, "fast_links %llu optimized %llu swaps %llu\n", (unsigned long long)c.fast_links,
          (unsigned long long)c.optimized, (unsigned long long)c.swaps);
  ASSERT_EQ(c.fast_links, 1);
  ASSERT_EQ(c.swaps, 1); /* the swap ran inside the window */

  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &second));
  fprintf(stderr, "first (linked) %llx, second %llx\n", H(first), H(second));

  /* The app is done with what it got: the context destroys it, and no
   * tier may hand it out again. */
  ASSERT_OK(pcache_release_pipeline(device, first));
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &third));
  fprintf(stderr, "after releasing %llx: third %llx\n", H(first), H(third));
  ASSERT_TRUE(third != first); /* a destroyed handle handed out */

  test_objects_destroy(&o);
  pcache_device_destroy(device);
  test_vk_fini(&vk);
  return 0;
}
