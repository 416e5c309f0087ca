/* Who owns pipelines (pcache.h, "Pipelines and who owns them"), and
 * batches: shared handles and their release (tiers forget them, published
 * or not; a second release is refused); a pipeline the app destroyed
 * itself, seen when the driver hands its handle out again; app ownership
 * (a handle per call, destroyed with vkDestroyPipeline); batches with
 * derivatives by index and by handle, a bad index, and early return.
 * Local only (no daemon): ownership does not depend on it. */
#include <errno.h>
#include <stdint.h>

#include "client/device.h"
#include "client/owned.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define H(p) ((long long)pcache__pipeline_to_u64(p))

static pcache_device *make_device(const test_vk *vk, uint32_t ownership) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  info.struct_size = sizeof info;
  info.pipeline_ownership = ownership;
  ASSERT_OK(pcache_device_create(NULL, &info, &device));
  return device;
}

static void shared(const test_vk *vk) {
  pcache_device *device = make_device(vk, PCACHE_PIPELINES_SHARED);
  test_objects o;
  test_graphics g0, g1;
  pcache_tier *tier;
  pcache_stats st;
  pcache_counters c;
  VkPipeline a, b, again, via_tier;

  test_objects_create(&o, device);
  test_graphics_info(&g0, &o, 0);
  test_graphics_info(&g1, &o, 1);
  /* Identical state, one handle. */
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g0.info, &a));
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g0.info, &b));
  ASSERT_EQ(H(a), H(b));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.pipelines, 1);
  ASSERT_EQ(st.compiles, 1);

  /* Released: the next request builds a new one, from the device cache. */
  ASSERT_OK(pcache_release_pipeline(device, a));
  ASSERT_ERR(pcache_release_pipeline(device, a), PCACHE_ENOT_FOUND);
  ASSERT_OK(pcache_release_pipeline(device, VK_NULL_HANDLE));
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g0.info, &again));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.pipelines, 1);
  ASSERT_EQ(st.compiles, 1); /* no second compile */
  ASSERT_OK(pcache_device_get_counters(device, &c));
  ASSERT_EQ(c.released, 1);

  /* A tier entry, pending and then published, is forgotten on release. */
  ASSERT_OK(pcache_device_select_tier(device, 7, &tier));
  ASSERT_VK(pcache_tier_get_graphics_pipeline(tier, 42, &g1.info, &via_tier));
  ASSERT_EQ(H(pcache_tier_lookup(tier, 42)), H(via_tier));
  ASSERT_OK(pcache_release_pipeline(device, via_tier));
  ASSERT_EQ(H(pcache_tier_lookup(tier, 42)), 0);
  ASSERT_VK(pcache_tier_get_graphics_pipeline(tier, 42, &g1.info, &via_tier));
  pcache_device_end_frame(device); /* published: the lock-free path */
  ASSERT_EQ(H(pcache_tier_lookup(tier, 42)), H(via_tier));
  ASSERT_OK(pcache_release_pipeline(device, via_tier));
  ASSERT_EQ(H(pcache_tier_lookup(tier, 42)), 0);
  pcache_device_end_frame(device);
  ASSERT_EQ(H(pcache_tier_lookup(tier, 42)), 0);
  /* Back again, into the slot it had. */
  ASSERT_VK(pcache_tier_get_graphics_pipeline(tier, 42, &g1.info, &via_tier));
  pcache_device_end_frame(device);
  ASSERT_EQ(H(pcache_tier_lookup(tier, 42)), H(via_tier));
  VkPipeline by_info;
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g1.info, &by_info));
  ASSERT_EQ(H(by_info), H(via_tier));

  /* The app destroys a context-owned pipeline itself (the misuse the issue
   * saw as "double free"), and the driver hands the handle value to the
   * next pipeline it makes. Whether a driver reuses a value soon is up to
   * its heap (never under ASan's quarantine), so the driver's side is
   * played here: the context is handed a handle it already owns. It must
   * forget the dead pipeline's entries (g0 no longer finds it) and own
   * the handle once. */
  ASSERT_VK(pcache__owned_add(&device->owned, again, NULL, 0, 0));
  ASSERT_OK(pcache_device_get_counters(device, &c));
  ASSERT_EQ(c.reused_handles, 1);
  VkPipeline g0_now;
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g0.info, &g0_now));
  ASSERT_NE(H(g0_now), H(again));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.pipelines, 3); /* again, g1's and g0's new one */
  ASSERT_OK(pcache_release_pipeline(device, again));
  ASSERT_ERR(pcache_release_pipeline(device, again), PCACHE_ENOT_FOUND);

  /* One pipeline under more keys than an owned entry holds in place (its
   * state hash and three draw keys): released, every tier forgets it,
   * pending or published, and the state builds anew. */
  pcache_tier *t[3];
  VkPipeline via[3], fresh;
  for (int i = 0; i < 3; i++) {
    ASSERT_OK(pcache_device_select_tier(device, 100 + (uint64_t)i, &t[i]));
    ASSERT_VK(pcache_tier_get_graphics_pipeline(t[i], 5, &g0.info, &via[i]));
    ASSERT_EQ(H(via[i]), H(g0_now));
    if (i == 1)
      pcache_device_end_frame(device);
  }
  ASSERT_OK(pcache_release_pipeline(device, g0_now));
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(H(pcache_tier_lookup(t[i], 5)), 0);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g0.info, &fresh));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 2); /* g0 and g1, each once */
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

static void app_owned(const test_vk *vk) {
  pcache_device *device = make_device(vk, PCACHE_PIPELINES_APP);
  PFN_vkDestroyPipeline destroy =
      (PFN_vkDestroyPipeline)vkGetDeviceProcAddr(vk->device, "vkDestroyPipeline");
  test_objects o;
  test_graphics g;
  test_compute cp;
  pcache_tier *tier;
  pcache_stats st;
  VkPipeline a, b, c;

  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 0);
  test_compute_info(&cp, &o, 0);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &a));
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &b));
  ASSERT_NE(H(a), H(b));
  ASSERT_VK(pcache_get_compute_pipeline(device, &cp.info, &c));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 2); /* the repeat came from the device cache */
  ASSERT_ERR(pcache_device_select_tier(device, 1, &tier), -EINVAL);
  /* The app's own: plain vkDestroyPipeline, or release, which is the same. */
  destroy(vk->device, a, NULL);
  ASSERT_OK(pcache_release_pipeline(device, b));
  destroy(vk->device, c, NULL);
  test_objects_destroy(&o);
  pcache_device_destroy(device); /* destroys nothing of the app's */
}

static void batches(const test_vk *vk, uint32_t ownership) {
  pcache_device *device = make_device(vk, ownership);
  PFN_vkDestroyPipeline destroy =
      (PFN_vkDestroyPipeline)vkGetDeviceProcAddr(vk->device, "vkDestroyPipeline");
  test_objects o;
  test_graphics g[4];
  VkGraphicsPipelineCreateInfo infos[4];
  VkPipeline p[4], plain;
  test_compute cs[2];
  VkComputePipelineCreateInfo cinfos[2];
  VkPipeline cp[2];

  test_objects_create(&o, device);
  /* The same state as element 0, without ALLOW_DERIVATIVES, first. */
  test_graphics_info(&g[0], &o, 0);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g[0].info, &plain));
  for (uint32_t i = 0; i < 4; i++) {
    test_graphics_info(&g[i], &o, i);
    infos[i] = g[i].info;
  }
  infos[0].flags = VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT;
  infos[1].flags = VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  infos[1].basePipelineIndex = 0;
  infos[2].flags = VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  infos[2].basePipelineIndex = 3; /* not an earlier element: refused */
  infos[3].flags = VK_PIPELINE_CREATE_DERIVATIVE_BIT | VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT;
  infos[3].basePipelineHandle = VK_NULL_HANDLE;
  infos[3].basePipelineIndex = 1; /* element 1 does not allow derivatives: the
                                     app's mistake, but the index resolves */
  infos[3].flags = VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT;
  infos[3].basePipelineIndex = -1;
  ASSERT_EQ(pcache_create_graphics_pipelines(device, 4, infos, p), VK_ERROR_INITIALIZATION_FAILED);
  ASSERT_NE(H(p[0]), 0);
  ASSERT_NE(H(p[1]), 0);
  ASSERT_EQ(H(p[2]), 0);
  ASSERT_NE(H(p[3]), 0);
  /* The flag changes what the app may do with it: not the plain one. */
  ASSERT_NE(H(p[0]), H(plain));
  /* Early return: nothing after the failure is tried. */
  VkPipeline q[3];
  VkGraphicsPipelineCreateInfo early[3] = {infos[2], infos[0], infos[0]};
  early[0].flags |= VK_PIPELINE_CREATE_EARLY_RETURN_ON_FAILURE_BIT;
  early[0].basePipelineIndex = 1;
  ASSERT_EQ(pcache_create_graphics_pipelines(device, 3, early, q), VK_ERROR_INITIALIZATION_FAILED);
  ASSERT_EQ(H(q[0]), 0);
  ASSERT_EQ(H(q[1]), 0);
  ASSERT_EQ(H(q[2]), 0);
  /* A derivative by handle, of a pipeline from an earlier batch. */
  VkGraphicsPipelineCreateInfo by_handle = infos[1];
  by_handle.basePipelineIndex = -1;
  by_handle.basePipelineHandle = p[0];
  VkPipeline d;
  ASSERT_VK(pcache_create_graphics_pipelines(device, 1, &by_handle, &d));
  ASSERT_NE(H(d), 0);
  /* Compute, the same way. */
  for (uint32_t i = 0; i < 2; i++) {
    test_compute_info(&cs[i], &o, i);
    cinfos[i] = cs[i].info;
  }
  cinfos[0].flags = VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT;
  cinfos[1].flags = VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  cinfos[1].basePipelineIndex = 0;
  ASSERT_VK(pcache_create_compute_pipelines(device, 2, cinfos, cp));
  ASSERT_NE(H(cp[0]), 0);
  ASSERT_NE(H(cp[1]), 0);
  ASSERT_EQ(pcache_create_graphics_pipelines(device, 0, NULL, NULL), VK_SUCCESS);
  if (ownership == PCACHE_PIPELINES_APP) {
    VkPipeline mine[] = {plain, p[0], p[1], p[3], d, cp[0], cp[1]};
    for (size_t i = 0; i < sizeof mine / sizeof *mine; i++)
      destroy(vk->device, mine[i], NULL);
  }
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

int main(void) {
  test_env env;
  test_vk vk;
  test_env_init(&env, "client-ownership");
  test_vk_init(&vk);
  shared(&vk);
  app_owned(&vk);
  batches(&vk, PCACHE_PIPELINES_SHARED);
  batches(&vk, PCACHE_PIPELINES_APP);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  return 0;
}
