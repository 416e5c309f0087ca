/* Misses without a stall (pcache_device_info.fast_link) on lavapipe: a
 * true miss returns a fast-linked pipeline at once, the optimized one is
 * compiled in the background and swapped into the tiers at end_frame
 * (counters, and the handle the tiers return); the linked, the optimized
 * and a plain monolithic pipeline render the same 64x64 image; a new
 * combination of known parts builds only the new part; the per-frame
 * budget holds; destroying a layout drops the queued optimization that
 * links with it; a new process finds the optimized pipeline in the daemon
 * (no fast link, nothing compiled). Also the other modes: NEVER compiles
 * as before, WAIT returns the optimized pipeline, and with
 * PCACHE_PIPELINES_APP nothing is swapped but a repeat links the optimized
 * pipeline from the device cache. Prepared ahead
 * (pcache_prepare_graphics_pipeline): the parts are built and nothing
 * linked, the first miss of that state only links, and a context or a
 * create info that does not fast-link builds nothing. Skipped (77) without
 * VK_EXT_graphics_pipeline_library. */
#include <stdio.h>
#include <string.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define SKIP 77
#define SIZE 64
#define PARTS 4

static pcache_counters counters(pcache_device *device) {
  pcache_counters c;
  ASSERT_OK(pcache_device_get_counters(device, &c));
  return c;
}

static pcache_stats stats(pcache_device *device) {
  pcache_stats s;
  ASSERT_OK(pcache_device_get_stats(device, &s));
  return s;
}

static pcache_device *device_new(pcache_client *client, const test_vk *vk, uint32_t mode,
                                 uint32_t ownership, uint32_t per_frame) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  info.struct_size = sizeof info;
  info.fast_link = mode;
  info.pipeline_ownership = ownership;
  info.fast_link_per_frame = per_frame;
  ASSERT_OK(pcache_device_create(client, &info, &device));
  return device;
}

/* ------------------------------------------------------------- rendering */

typedef struct target {
  const test_vk *vk;
  const test_objects *o;
  VkQueue queue;
  VkImage image;
  VkImageView view;
  VkFramebuffer framebuffer;
  VkBuffer readback, uniform;
  VkDeviceMemory memory[3];
  VkDescriptorPool pool;
  VkDescriptorSet set;
  VkCommandPool commands;
} target;

static uint32_t memory_type(const test_vk *vk, uint32_t bits, VkMemoryPropertyFlags want) {
  VkPhysicalDeviceMemoryProperties props;
  vkGetPhysicalDeviceMemoryProperties(vk->physical_device, &props);
  for (uint32_t i = 0; i < props.memoryTypeCount; i++)
    if ((bits & (1u << i)) && (props.memoryTypes[i].propertyFlags & want) == want)
      return i;
  TEST_FAIL_("no memory type");
}

static VkDeviceMemory bind(const test_vk *vk, VkMemoryRequirements req,
                           VkMemoryPropertyFlags want) {
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .allocationSize = req.size,
                             .memoryTypeIndex = memory_type(vk, req.memoryTypeBits, want)};
  VkDeviceMemory m;
  ASSERT_VK(vkAllocateMemory(vk->device, &ai, NULL, &m));
  return m;
}

static VkBuffer buffer_new(const test_vk *vk, VkDeviceSize size, VkBufferUsageFlags usage,
                           VkDeviceMemory *ret_memory) {
  VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
                           .size = size,
                           .usage = usage,
                           .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
  VkMemoryRequirements req;
  VkBuffer b;
  ASSERT_VK(vkCreateBuffer(vk->device, &bi, NULL, &b));
  vkGetBufferMemoryRequirements(vk->device, b, &req);
  *ret_memory =
      bind(vk, req, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  ASSERT_VK(vkBindBufferMemory(vk->device, b, *ret_memory, 0));
  return b;
}

static void target_init(target *t, const test_vk *vk, const test_objects *o) {
  VkImageCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
                          .imageType = VK_IMAGE_TYPE_2D,
                          .format = VK_FORMAT_R8G8B8A8_UNORM,
                          .extent = {SIZE, SIZE, 1},
                          .mipLevels = 1,
                          .arrayLayers = 1,
                          .samples = VK_SAMPLE_COUNT_1_BIT,
                          .tiling = VK_IMAGE_TILING_OPTIMAL,
                          .usage = VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT |
                                   VK_IMAGE_USAGE_TRANSFER_SRC_BIT};
  VkMemoryRequirements req;
  float scale[4] = {1.0f, 1.0f, 1.0f, 1.0f};
  void *mapped;
  memset(t, 0, sizeof *t);
  t->vk = vk;
  t->o = o;
  vkGetDeviceQueue(vk->device, vk->queue_family, 0, &t->queue);
  ASSERT_VK(vkCreateImage(vk->device, &ii, NULL, &t->image));
  vkGetImageMemoryRequirements(vk->device, t->image, &req);
  t->memory[0] = bind(vk, req, 0);
  ASSERT_VK(vkBindImageMemory(vk->device, t->image, t->memory[0], 0));
  VkImageViewCreateInfo vi = {.sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO,
                              .image = t->image,
                              .viewType = VK_IMAGE_VIEW_TYPE_2D,
                              .format = VK_FORMAT_R8G8B8A8_UNORM,
                              .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1}};
  ASSERT_VK(vkCreateImageView(vk->device, &vi, NULL, &t->view));
  VkFramebufferCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO,
                                .renderPass = o->render_pass,
                                .attachmentCount = 1,
                                .pAttachments = &t->view,
                                .width = SIZE,
                                .height = SIZE,
                                .layers = 1};
  ASSERT_VK(vkCreateFramebuffer(vk->device, &fi, NULL, &t->framebuffer));
  t->readback = buffer_new(vk, SIZE * SIZE * 4, VK_BUFFER_USAGE_TRANSFER_DST_BIT, &t->memory[1]);
  t->uniform = buffer_new(vk, sizeof scale, VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT, &t->memory[2]);
  ASSERT_VK(vkMapMemory(vk->device, t->memory[2], 0, sizeof scale, 0, &mapped));
  memcpy(mapped, scale, sizeof scale);
  vkUnmapMemory(vk->device, t->memory[2]);

  VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1},
                                   {VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1}};
  VkDescriptorPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                   .maxSets = 1,
                                   .poolSizeCount = 2,
                                   .pPoolSizes = sizes};
  ASSERT_VK(vkCreateDescriptorPool(vk->device, &pi, NULL, &t->pool));
  VkDescriptorSetAllocateInfo si = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                    .descriptorPool = t->pool,
                                    .descriptorSetCount = 1,
                                    .pSetLayouts = &o->set_layout};
  ASSERT_VK(vkAllocateDescriptorSets(vk->device, &si, &t->set));
  VkDescriptorBufferInfo bi = {t->uniform, 0, VK_WHOLE_SIZE};
  VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                            .dstSet = t->set,
                            .dstBinding = 0,
                            .descriptorCount = 1,
                            .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
                            .pBufferInfo = &bi};
  vkUpdateDescriptorSets(vk->device, 1, &w, 0, NULL);
  VkCommandPoolCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                .queueFamilyIndex = vk->queue_family};
  ASSERT_VK(vkCreateCommandPool(vk->device, &ci, NULL, &t->commands));
}

static void target_fini(target *t) {
  VkDevice dev = t->vk->device;
  vkDestroyCommandPool(dev, t->commands, NULL);
  vkDestroyDescriptorPool(dev, t->pool, NULL);
  vkDestroyBuffer(dev, t->uniform, NULL);
  vkDestroyBuffer(dev, t->readback, NULL);
  vkDestroyFramebuffer(dev, t->framebuffer, NULL);
  vkDestroyImageView(dev, t->view, NULL);
  vkDestroyImage(dev, t->image, NULL);
  for (int i = 0; i < 3; i++)
    vkFreeMemory(dev, t->memory[i], NULL);
}

/* One triangle with pipeline, cleared to grey first; the pixels to ret. */
static void render(target *t, VkPipeline pipeline, uint8_t ret[SIZE * SIZE * 4]) {
  VkDevice dev = t->vk->device;
  VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                    .commandPool = t->commands,
                                    .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                    .commandBufferCount = 1};
  VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                 .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
  VkClearValue clear = {.color = {.float32 = {0.25f, 0.25f, 0.25f, 1.0f}}};
  VkRenderPassBeginInfo rp = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO,
                              .renderPass = t->o->render_pass,
                              .framebuffer = t->framebuffer,
                              .renderArea = {{0, 0}, {SIZE, SIZE}},
                              .clearValueCount = 1,
                              .pClearValues = &clear};
  VkViewport viewport = {0, 0, SIZE, SIZE, 0, 1};
  VkRect2D scissor = {{0, 0}, {SIZE, SIZE}};
  float offset[2] = {0, 0};
  VkImageMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
                                  .srcAccessMask = VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                                  .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT,
                                  .oldLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL,
                                  .newLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL,
                                  .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                  .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                  .image = t->image,
                                  .subresourceRange = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1}};
  VkBufferImageCopy copy = {.imageSubresource = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 0, 1},
                            .imageExtent = {SIZE, SIZE, 1}};
  VkCommandBuffer cb;
  void *mapped;
  ASSERT_VK(vkAllocateCommandBuffers(dev, &ai, &cb));
  ASSERT_VK(vkBeginCommandBuffer(cb, &bi));
  vkCmdBeginRenderPass(cb, &rp, VK_SUBPASS_CONTENTS_INLINE);
  vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_GRAPHICS, pipeline);
  vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_GRAPHICS, t->o->layout, 0, 1, &t->set, 0,
                          NULL);
  vkCmdPushConstants(cb, t->o->layout, VK_SHADER_STAGE_VERTEX_BIT, 0, sizeof offset, offset);
  vkCmdSetViewport(cb, 0, 1, &viewport);
  vkCmdSetScissor(cb, 0, 1, &scissor);
  vkCmdDraw(cb, 3, 1, 0, 0);
  vkCmdEndRenderPass(cb);
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                       VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 0, NULL, 1, &barrier);
  vkCmdCopyImageToBuffer(cb, t->image, VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL, t->readback, 1, &copy);
  ASSERT_VK(vkEndCommandBuffer(cb));
  VkSubmitInfo submit = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  ASSERT_VK(vkQueueSubmit(t->queue, 1, &submit, VK_NULL_HANDLE));
  ASSERT_VK(vkQueueWaitIdle(t->queue));
  ASSERT_VK(vkMapMemory(dev, t->memory[1], 0, SIZE * SIZE * 4, 0, &mapped));
  memcpy(ret, mapped, SIZE * SIZE * 4);
  vkUnmapMemory(dev, t->memory[1]);
  vkFreeCommandBuffers(dev, t->commands, 1, &cb);
}

/* Pixels that are not the clear colour (the triangle's). */
static size_t drawn(const uint8_t *pixels) {
  size_t n = 0;
  for (size_t i = 0; i < SIZE * SIZE; i++)
    n += pixels[i * 4] != 64 || pixels[i * 4 + 1] != 64 || pixels[i * 4 + 2] != 64;
  return n;
}

/* ---------------------------------------------------------------- the runs */

static uint8_t image_linked[SIZE * SIZE * 4], image_optimized[SIZE * SIZE * 4],
    image_plain[SIZE * SIZE * 4];

/* THEN_OPTIMIZE with shared ownership, cold (an empty daemon). */
static void then_optimize(const test_vk *vk, pcache_client *client) {
  pcache_device *device = device_new(client, vk, PCACHE_FAST_LINK_THEN_OPTIMIZE, 0, 0);
  test_objects o;
  test_graphics g, g2;
  pcache_tier *tier;
  VkPipeline linked, optimized, again, plain;
  pcache_counters c;
  pcache_stats s;
  target t;

  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 0);
  ASSERT_OK(pcache_device_select_tier(device, 7, &tier));
  ASSERT_VK(pcache_tier_get_graphics_pipeline(tier, 1, &g.info, &linked));
  c = counters(device);
  ASSERT_EQ(c.fast_links, 1);
  ASSERT_EQ(c.swaps, 0);
  /* The create-info path: the same state, the same (linked) handle. */
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &again));
  ASSERT_TRUE(again == linked);

  pcache_device_flush(device); /* waits for the optimization */
  c = counters(device);
  ASSERT_EQ(c.optimized, 1);
  ASSERT_EQ(c.swaps, 0);
  ASSERT_TRUE(pcache_tier_lookup(tier, 1) == linked); /* until end_frame */
  pcache_device_end_frame(device);
  c = counters(device);
  ASSERT_EQ(c.swaps, 1);
  ASSERT_EQ(c.swap_frames_total, 1);
  ASSERT_GT(c.swap_ns_total, 0);
  ASSERT_EQ(c.swap_ns_max, c.swap_ns_total);
  optimized = pcache_tier_lookup(tier, 1);
  ASSERT_TRUE(optimized != VK_NULL_HANDLE && optimized != linked);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &again));
  ASSERT_TRUE(again == optimized);
  /* Four part libraries and the optimized pipeline compiled, uploaded. */
  s = stats(device);
  ASSERT_EQ(s.compiles, PARTS + 1);
  ASSERT_EQ(s.uploaded, PARTS + 1);

  /* The linked pipeline stays valid: it, the optimized one and a plain
   * monolithic pipeline draw the same image. */
  ASSERT_VK(vkCreateGraphicsPipelines(vk->device, VK_NULL_HANDLE, 1, &g.info, NULL, &plain));
  target_init(&t, vk, &o);
  render(&t, linked, image_linked);
  render(&t, optimized, image_optimized);
  render(&t, plain, image_plain);
  ASSERT_GT(drawn(image_linked), SIZE * SIZE / 16);
  ASSERT_TRUE(memcmp(image_linked, image_optimized, sizeof image_linked) == 0);
  ASSERT_TRUE(memcmp(image_linked, image_plain, sizeof image_linked) == 0);
  target_fini(&t);
  vkDestroyPipeline(vk->device, plain, NULL);

  /* Blending: only the fragment output part is new, so only it compiles
   * before the link (the optimization may be compiling by the time the
   * call returns: counted after the flush). */
  test_graphics_info(&g2, &o, 2);
  ASSERT_VK(pcache_tier_get_graphics_pipeline(tier, 2, &g2.info, &linked));
  ASSERT_EQ(counters(device).fast_links, 2);
  pcache_device_flush(device);
  ASSERT_EQ(stats(device).compiles, PARTS + 1 + 2); /* the new part, its optimization */
  pcache_device_end_frame(device);
  ASSERT_EQ(counters(device).swaps, 2);
  ASSERT_TRUE(pcache_tier_lookup(tier, 2) != linked);
  ASSERT_EQ(stats(device).uploaded, PARTS + 3);

  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

/* The per-frame budget, and a layout destroyed under a queued job. */
static void budget(const test_vk *vk, pcache_client *client) {
  pcache_device *device = device_new(client, vk, PCACHE_FAST_LINK_THEN_OPTIMIZE, 0, 1);
  VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1};
  VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_VERTEX_BIT, .size = 8};
  VkPipelineLayout second;
  test_objects o;
  test_graphics g[3];
  VkPipeline p[3];

  test_objects_create(&o, device);
  li.pSetLayouts = &o.set_layout;
  li.pushConstantRangeCount = 1;
  li.pPushConstantRanges = &push;
  ASSERT_VK(pcache_create_pipeline_layout(device, &li, NULL, &second));
  /* Three new states (spec constants: only the fragment part differs),
   * the third linked with a layout of its own. */
  for (uint32_t i = 0; i < 3; i++) {
    test_graphics_info(&g[i], &o, 16 + 4 * i);
    if (i == 2)
      g[i].info.layout = second;
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g[i].info, &p[i]));
  }
  ASSERT_EQ(counters(device).fast_links, 3);
  pcache_device_flush(device);
  ASSERT_EQ(counters(device).optimized, 1);             /* one a frame */
  pcache_destroy_pipeline_layout(device, second, NULL); /* drops the third's job */
  pcache_device_end_frame(device);
  ASSERT_EQ(counters(device).swaps, 1);
  pcache_device_flush(device);
  ASSERT_EQ(counters(device).optimized, 2);
  pcache_device_end_frame(device);
  pcache_device_end_frame(device);
  pcache_device_flush(device);
  ASSERT_EQ(counters(device).optimized, 2);
  ASSERT_EQ(counters(device).swaps, 2);
  ASSERT_EQ(counters(device).swap_frames_total, 1 + 2);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

/* The other modes, each on its own states (variants 8 and up). */
static void other_modes(const test_vk *vk, pcache_client *client) {
  test_objects o;
  test_graphics g;
  VkPipeline p, q;
  pcache_device *device;

  /* NEVER: compiled in the caller's thread, as before. */
  device = device_new(client, vk, PCACHE_FAST_LINK_NEVER, 0, 0);
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 8);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  ASSERT_EQ(stats(device).compiles, 1);
  ASSERT_EQ(counters(device).fast_links, 0);
  test_objects_destroy(&o);
  pcache_device_destroy(device);

  /* WAIT: the optimized pipeline at once, nothing in the background. */
  device = device_new(client, vk, PCACHE_FAST_LINK_WAIT, 0, 0);
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 12);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  ASSERT_EQ(counters(device).fast_links, 0);
  ASSERT_EQ(counters(device).optimized, 0);
  ASSERT_EQ(stats(device).compiles, 2); /* the new fragment part, the link */
  test_objects_destroy(&o);
  pcache_device_destroy(device);

  /* THEN_OPTIMIZE with the app's ownership: its handle is never swapped; a
   * repeat after the optimization is the optimized pipeline, its own. */
  device = device_new(client, vk, PCACHE_FAST_LINK_THEN_OPTIMIZE, PCACHE_PIPELINES_APP, 0);
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 40);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  ASSERT_EQ(counters(device).fast_links, 1);
  pcache_device_flush(device);
  pcache_device_end_frame(device);
  ASSERT_EQ(counters(device).optimized, 1);
  ASSERT_EQ(counters(device).swaps, 0);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &q));
  ASSERT_TRUE(q != p);
  ASSERT_EQ(counters(device).fast_links, 1);
  vkDestroyPipeline(vk->device, q, NULL);
  vkDestroyPipeline(vk->device, p, NULL);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

/* Prepared ahead, on states of their own (variants 48 and up: a fragment
 * shader no other context made). */
static void prepared(const test_vk *vk, pcache_client *client) {
  pcache_device *device = device_new(client, vk, PCACHE_FAST_LINK_THEN_OPTIMIZE, 0, 0);
  test_objects o;
  test_graphics g, g2;
  VkPipeline p;
  pcache_counters c;
  uint64_t compiles;

  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 48);
  ASSERT_VK(pcache_prepare_graphics_pipeline(device, &g.info));
  c = counters(device);
  ASSERT_EQ(c.prepared, 1);
  ASSERT_EQ(c.parts_made, PARTS); /* this context had none */
  ASSERT_EQ(c.fast_links, 0);
  ASSERT_EQ(stats(device).pipelines, 0); /* nothing linked */
  compiles = stats(device).compiles;
  ASSERT_GT(compiles, 0); /* at least the new fragment shader's part */
  /* Again: everything is there. */
  ASSERT_VK(pcache_prepare_graphics_pipeline(device, &g.info));
  ASSERT_EQ(counters(device).prepared, 2);
  ASSERT_EQ(counters(device).parts_made, PARTS);
  ASSERT_EQ(stats(device).compiles, compiles);

  /* The miss only links. */
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  c = counters(device);
  ASSERT_EQ(c.fast_links, 1);
  ASSERT_EQ(c.links_only, 1);
  ASSERT_EQ(c.parts_made, PARTS);
  /* Blending: three prepared parts and a new fragment output part. */
  test_graphics_info(&g2, &o, 50);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g2.info, &p));
  c = counters(device);
  ASSERT_EQ(c.fast_links, 2);
  ASSERT_EQ(c.links_only, 1);
  ASSERT_EQ(c.parts_made, PARTS + 1);

  /* A create info it does not split: nothing built. */
  test_graphics_info(&g2, &o, 56);
  g2.info.flags = VK_PIPELINE_CREATE_DISABLE_OPTIMIZATION_BIT;
  ASSERT_EQ(pcache_prepare_graphics_pipeline(device, &g2.info), VK_ERROR_FEATURE_NOT_PRESENT);
  ASSERT_EQ(counters(device).parts_made, PARTS + 1);
  ASSERT_EQ(pcache_prepare_graphics_pipeline(NULL, &g2.info), VK_ERROR_INITIALIZATION_FAILED);
  ASSERT_EQ(pcache_prepare_graphics_pipeline(device, NULL), VK_ERROR_INITIALIZATION_FAILED);
  pcache_device_flush(device);
  test_objects_destroy(&o);
  pcache_device_destroy(device);

  /* A context that does not fast-link: nothing built. */
  device = device_new(client, vk, PCACHE_FAST_LINK_NEVER, 0, 0);
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 60);
  ASSERT_EQ(pcache_prepare_graphics_pipeline(device, &g.info), VK_ERROR_FEATURE_NOT_PRESENT);
  ASSERT_EQ(stats(device).compiles, 0);
  ASSERT_EQ(counters(device).parts_made, 0);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

/* A new process: the parts and the optimized pipeline come from the
 * daemon, so the miss links the optimized pipeline at once. */
static void warm(const test_vk *vk, pcache_client *client) {
  pcache_device *device = device_new(client, vk, PCACHE_FAST_LINK_THEN_OPTIMIZE, 0, 0);
  test_objects o;
  test_graphics g;
  VkPipeline p;
  pcache_stats s;
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, 0);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  s = stats(device);
  ASSERT_EQ(counters(device).fast_links, 0);
  ASSERT_EQ(s.compiles, 0);
  ASSERT_EQ(s.daemon_hits, PARTS + 1);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

int main(int argc, char **argv) {
  test_env env;
  test_vk vk;
  pcache_client *client;
  int is_warm = argc > 1 && strcmp(argv[1], "warm") == 0;
  if (!is_warm)
    test_env_init(&env, "client-fastlink");
  if (!test_vk_init_gpl(&vk)) {
    fprintf(stderr, "no VK_EXT_graphics_pipeline_library: skipped\n");
    if (!is_warm)
      test_env_cleanup(&env);
    return SKIP;
  }
  if (!is_warm)
    test_daemon_start(&env, NULL);
  client = util_client(5000);
  if (is_warm) {
    warm(&vk, client);
  } else {
    then_optimize(&vk, client);
    budget(&vk, client);
    other_modes(&vk, client);
    prepared(&vk, client);
  }
  pcache_client_close(client);
  test_vk_fini(&vk);
  if (!is_warm) {
    util_run_self(argv[0], "warm");
    test_env_cleanup(&env);
  }
  return 0;
}
