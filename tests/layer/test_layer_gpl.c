/* Graphics pipeline libraries (VK_EXT_graphics_pipeline_library) through
 * the layer, from a plain Vulkan program: the four part libraries, linked
 * with and without link-time optimization; then the fragment shader
 * library destroyed and a new one (another specialization) linked in its
 * place. Twice against one daemon: the first run compiles and uploads
 * every library and linked pipeline, the second gets each from the
 * daemon. Skipped (77) when the driver lacks the extension. */
#include <stdio.h>

#include "layer_util.h"
#include "test.h"
#include "vk.h"

#define SKIP 77
/* The four libraries and the new fragment shader library; the three
 * linked pipelines. */
#define LIBRARIES (TEST_GPL_PARTS + 1)
#define LINKED 3
#define PIPELINES (LIBRARIES + LINKED)

static void create_libraries(VkDevice device, const test_gpl *t, VkPipeline ret[TEST_GPL_PARTS]) {
  for (int i = 0; i < TEST_GPL_PARTS; i++) {
    ASSERT_VK(vkCreateGraphicsPipelines(device, VK_NULL_HANDLE, 1, &t->library[i], NULL, &ret[i]));
    ASSERT_TRUE(ret[i] != VK_NULL_HANDLE);
  }
}

static VkPipeline create_linked(VkDevice device, test_gpl *t, const VkPipeline libraries[],
                                VkPipelineCreateFlags flags) {
  VkPipeline p;
  test_gpl_link(t, libraries, flags);
  ASSERT_VK(vkCreateGraphicsPipelines(device, VK_NULL_HANDLE, 1, &t->linked, NULL, &p));
  ASSERT_TRUE(p != VK_NULL_HANDLE);
  return p;
}

/* One run of the "program". Returns 0 when the device has no graphics
 * pipeline libraries. */
static int run_program(void) {
  test_vk vk;
  test_objects o;
  test_gpl t, t2;
  VkPipeline libraries[TEST_GPL_PARTS], linked[LINKED];

  if (!test_vk_init_gpl(&vk))
    return 0;
  test_objects_create_plain(&o, vk.device);
  test_gpl_info(&t, &o, 0);
  create_libraries(vk.device, &t, libraries);
  linked[0] = create_linked(vk.device, &t, libraries, 0);
  linked[1] =
      create_linked(vk.device, &t, libraries, VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT);

  /* The fragment shader library goes; one of another variant (another
   * specialization constant) takes its place, perhaps at its handle. */
  vkDestroyPipeline(vk.device, libraries[2], NULL);
  test_gpl_info(&t2, &o, 4);
  ASSERT_VK(
      vkCreateGraphicsPipelines(vk.device, VK_NULL_HANDLE, 1, &t2.library[2], NULL, &libraries[2]));
  linked[2] = create_linked(vk.device, &t, libraries, 0);

  for (int i = 0; i < LINKED; i++)
    vkDestroyPipeline(vk.device, linked[i], NULL);
  for (int i = 0; i < TEST_GPL_PARTS; i++)
    vkDestroyPipeline(vk.device, libraries[i], NULL);
  test_objects_destroy(&o);
  test_vk_fini(&vk);
  return 1;
}

static void expect_common(const layer_report *r) {
  ASSERT_EQ(r->lines, 1);
  ASSERT_EQ(r->pipelines, PIPELINES);
  ASSERT_EQ(r->hashable, PIPELINES);
  ASSERT_EQ(r->unhashable, 0);
  ASSERT_EQ(r->unhashable_lines, 0);
  ASSERT_EQ(r->passed_through, 0);
  ASSERT_EQ(r->local_hits, 0);
}

int main(void) {
  test_env env;
  layer_report r;
  layer_test_start(&env, "layer-gpl");

  /* 1. A fresh daemon: every library and linked pipeline compiles, and
   * the daemon takes each (the linked ones name the libraries' modules,
   * which came with the libraries). */
  if (!run_program()) {
    fprintf(stderr, "no VK_EXT_graphics_pipeline_library: skipped\n");
    test_env_cleanup(&env);
    return SKIP;
  }
  layer_report_read(&r);
  expect_common(&r);
  ASSERT_EQ(r.compiles, PIPELINES);
  ASSERT_EQ(r.daemon_hits, 0);
  ASSERT_EQ(r.uploaded, PIPELINES);

  /* 2. The same daemon: every one of them comes from it. */
  ASSERT_TRUE(run_program());
  layer_report_read(&r);
  expect_common(&r);
  ASSERT_EQ(r.daemon_hits, PIPELINES);
  ASSERT_EQ(r.compiles, 0);

  test_env_cleanup(&env);
  printf("test_layer_gpl: ok\n");
  return 0;
}
