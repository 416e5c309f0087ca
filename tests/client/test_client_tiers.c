/* The app-key path and the create-info path agree; end_frame publishes
 * pipelines for lock-free lookups; unhashable pipelines are built, counted
 * and cached only under an app key. Local only (PCACHE_DISABLE). */
#include <stdlib.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

int main(void) {
  test_env env;
  util_app a;
  pcache_tier *tier, *tier_again, *other;
  test_graphics g;
  test_compute c;
  VkPipeline by_key, by_info, p, q;
  pcache_stats st;

  test_env_init(&env, "client-tiers");
  setenv("PCACHE_DISABLE", "1", 1);
  util_app_open_device(&a, 0);
  ASSERT_EQ(pcache_client_connected(a.client), 0);
  ASSERT_TRUE(pcache_device_pipeline_cache(a.device) != VK_NULL_HANDLE);
  test_objects_create(&a.o, a.device);

  ASSERT_OK(pcache_device_select_tier(a.device, 42, &tier));
  ASSERT_OK(pcache_device_select_tier(a.device, 42, &tier_again));
  ASSERT_OK(pcache_device_select_tier(a.device, 43, &other));
  ASSERT_TRUE(tier == tier_again);
  ASSERT_TRUE(tier != other);
  ASSERT_TRUE(pcache_tier_lookup(tier, 7) == VK_NULL_HANDLE);

  /* App key first, then the same state by create info: one pipeline. */
  test_graphics_info(&g, &a.o, 3);
  ASSERT_VK(pcache_tier_get_graphics_pipeline(tier, 7, &g.info, &by_key));
  ASSERT_VK(pcache_get_graphics_pipeline(a.device, &g.info, &by_info));
  ASSERT_TRUE(by_key == by_info);
  /* Found before publishing (pending part), and after it without a lock. */
  ASSERT_TRUE(pcache_tier_lookup(tier, 7) == by_key);
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.pipelines_this_frame, 1);
  pcache_device_end_frame(a.device);
  ASSERT_TRUE(pcache_tier_lookup(tier, 7) == by_key);
  ASSERT_TRUE(pcache_tier_lookup(tier, 8) == VK_NULL_HANDLE);
  ASSERT_TRUE(pcache_tier_lookup(other, 7) == VK_NULL_HANDLE);
  /* Another draw key with the same state: still the same pipeline. */
  ASSERT_VK(pcache_tier_get_graphics_pipeline(other, 1, &g.info, &p));
  ASSERT_TRUE(p == by_key);

  /* Create info first, then the app key. */
  test_compute_info(&c, &a.o, 5);
  ASSERT_VK(pcache_get_compute_pipeline(a.device, &c.info, &by_info));
  ASSERT_VK(pcache_tier_get_compute_pipeline(tier, 9, &c.info, &by_key));
  ASSERT_TRUE(by_key == by_info);
  ASSERT_VK(pcache_tier_get_compute_pipeline(tier, 9, &c.info, &p));
  ASSERT_TRUE(p == by_key);

  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.misses, 2);
  ASSERT_EQ(st.compiles, 2);
  ASSERT_EQ(st.pipelines, 2);
  /* By hash: the graphics by create info, the other tier's miss, tier 9's
   * miss. By app key: two lookups of 7 and the second get of 9. */
  ASSERT_EQ(st.hits_create_info, 3);
  ASSERT_EQ(st.hits_app_key, 3);
  ASSERT_EQ(st.pipelines_this_frame, 1);
  ASSERT_EQ(st.upload_queue, 0);
  ASSERT_OK(pcache_device_flush(a.device)); /* local only: nothing to wait for */

  /* A module not made through a wrapper makes the pipeline unhashable. */
  {
    VkShaderModule raw;
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    mci.pCode = test_vk_shader_code("fill.comp", &mci.codeSize);
    ASSERT_VK(vkCreateShaderModule(a.vk.device, &mci, NULL, &raw));
    test_compute_info(&c, &a.o, 11);
    c.info.stage.module = raw;
    ASSERT_VK(pcache_get_compute_pipeline(a.device, &c.info, &p));
    ASSERT_VK(pcache_get_compute_pipeline(a.device, &c.info, &q));
    ASSERT_TRUE(p != q); /* no state hash: nothing to find it by */
    ASSERT_VK(pcache_tier_get_compute_pipeline(tier, 100, &c.info, &p));
    ASSERT_VK(pcache_tier_get_compute_pipeline(tier, 100, &c.info, &q));
    ASSERT_TRUE(p == q); /* the app key remembers it */
    ASSERT_OK(pcache_device_get_stats(a.device, &st));
    ASSERT_EQ(st.unhashable, 3);
    ASSERT_EQ(st.compiles, 2);
    ASSERT_EQ(st.pipelines, 5);
    vkDestroyShaderModule(a.vk.device, raw, NULL);
  }

  util_app_close(&a);
  test_env_cleanup(&env);
  return 0;
}
