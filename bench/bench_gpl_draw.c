/* bench_gpl's third measure: what a draw costs on the GPU with the
 * fast-linked pipeline and with the optimized one, from timestamp queries
 * around the same draws of a GRID x GRID quad mesh into a W x W target with
 * the demo's render pass, descriptor set and push constants. */
#include <string.h>

#include "bench_gpl_draw.h"

#define REPS 5
#define VERTICES (GRID * GRID * 6)

typedef struct draw_ctx {
  VkDevice dev;
  VkPhysicalDeviceMemoryProperties mem;
  VkDeviceMemory memory[8];
  uint32_t n_memory;
} draw_ctx;

static VkDeviceMemory alloc(draw_ctx *c, VkMemoryRequirements req, VkMemoryPropertyFlags want) {
  VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
                             .allocationSize = req.size};
  for (ai.memoryTypeIndex = 0; ai.memoryTypeIndex < c->mem.memoryTypeCount; ai.memoryTypeIndex++)
    if ((req.memoryTypeBits & (1u << ai.memoryTypeIndex)) &&
        (c->mem.memoryTypes[ai.memoryTypeIndex].propertyFlags & want) == want)
      break;
  CHECK(vkAllocateMemory(c->dev, &ai, NULL, &c->memory[c->n_memory]));
  return c->memory[c->n_memory++];
}

static VkImage image(draw_ctx *c, VkFormat format, uint32_t size, VkImageUsageFlags usage,
                     VkImageAspectFlags aspect, VkImageView *ret_view) {
  VkImageCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_IMAGE_CREATE_INFO,
                          .imageType = VK_IMAGE_TYPE_2D,
                          .format = format,
                          .extent = {size, size, 1},
                          .mipLevels = 1,
                          .arrayLayers = 1,
                          .samples = VK_SAMPLE_COUNT_1_BIT,
                          .tiling = VK_IMAGE_TILING_OPTIMAL,
                          .usage = usage};
  VkMemoryRequirements req;
  VkImage img;
  CHECK(vkCreateImage(c->dev, &ii, NULL, &img));
  vkGetImageMemoryRequirements(c->dev, img, &req);
  CHECK(vkBindImageMemory(c->dev, img, alloc(c, req, 0), 0));
  VkImageViewCreateInfo vi = {.sType = VK_STRUCTURE_TYPE_IMAGE_VIEW_CREATE_INFO,
                              .image = img,
                              .viewType = VK_IMAGE_VIEW_TYPE_2D,
                              .format = format,
                              .subresourceRange = {aspect, 0, 1, 0, 1}};
  CHECK(vkCreateImageView(c->dev, &vi, NULL, ret_view));
  return img;
}

/* A host-visible buffer holding size bytes of data. */
static VkBuffer buffer(draw_ctx *c, VkBufferUsageFlags usage, const void *data, size_t size) {
  VkBufferCreateInfo bi = {
      .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = size, .usage = usage};
  VkMemoryRequirements req;
  VkDeviceMemory m;
  VkBuffer b;
  void *p;
  CHECK(vkCreateBuffer(c->dev, &bi, NULL, &b));
  vkGetBufferMemoryRequirements(c->dev, b, &req);
  m = alloc(c, req, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT);
  CHECK(vkBindBufferMemory(c->dev, b, m, 0));
  CHECK(vkMapMemory(c->dev, m, 0, size, 0, &p));
  memcpy(p, data, size);
  vkUnmapMemory(c->dev, m);
  return b;
}

static void submit(VkDevice dev, VkQueue q, VkCommandBuffer cb) {
  VkSubmitInfo si = {
      .sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &cb};
  CHECK(vkQueueSubmit(q, 1, &si, VK_NULL_HANDLE));
  CHECK(vkQueueWaitIdle(q));
  (void)dev;
}

void draw_bench(const vk_t *v, VkDevice dev, const objects *o, VkPipeline linked,
                VkPipeline optimized, uint32_t draws) {
  draw_ctx c = {.dev = dev};
  VkImageView color_view, depth_view, tex_view;
  VkImage color, depth, tex;
  VkFramebuffer fb;
  VkQueue q;
  VkCommandPool pool;
  VkCommandBuffer cb;
  VkDescriptorPool dpool;
  VkDescriptorSet set;
  VkQueryPool queries;
  float *verts = malloc(VERTICES * 8 * sizeof(float)), scene[148] = {0}, model[16] = {0};
  uint64_t ns[2][REPS];
  VkPipeline pipelines[2] = {linked, optimized};

  vkGetPhysicalDeviceMemoryProperties(v->phys, &c.mem);
  vkGetDeviceQueue(dev, v->family, 0, &q);
  color = image(&c, VK_FORMAT_R8G8B8A8_UNORM, W,
                VK_IMAGE_USAGE_COLOR_ATTACHMENT_BIT | VK_IMAGE_USAGE_TRANSFER_SRC_BIT,
                VK_IMAGE_ASPECT_COLOR_BIT, &color_view);
  depth = image(&c, DEPTH_FORMAT, W, VK_IMAGE_USAGE_DEPTH_STENCIL_ATTACHMENT_BIT,
                VK_IMAGE_ASPECT_DEPTH_BIT, &depth_view);
  tex = image(&c, VK_FORMAT_R8G8B8A8_UNORM, 1,
              VK_IMAGE_USAGE_SAMPLED_BIT | VK_IMAGE_USAGE_TRANSFER_DST_BIT,
              VK_IMAGE_ASPECT_COLOR_BIT, &tex_view);
  VkImageView atts[2] = {color_view, depth_view};
  VkFramebufferCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FRAMEBUFFER_CREATE_INFO,
                                .renderPass = o->pass,
                                .attachmentCount = 2,
                                .pAttachments = atts,
                                .width = W,
                                .height = W,
                                .layers = 1};
  CHECK(vkCreateFramebuffer(dev, &fi, NULL, &fb));

  /* The grid in clip space (identity matrices), normals facing the
   * camera, UVs across it; lights in front. */
  for (uint32_t y = 0, k = 0; y < GRID; y++)
    for (uint32_t x = 0; x < GRID; x++)
      for (int corner = 0; corner < 6; corner++, k++) {
        static const int dx[6] = {0, 1, 0, 1, 1, 0}, dy[6] = {0, 0, 1, 0, 1, 1};
        float u = (float)(x + dx[corner]) / GRID, w = (float)(y + dy[corner]) / GRID;
        float *p = verts + k * 8;
        p[0] = u * 2 - 1, p[1] = w * 2 - 1, p[2] = 0.5f;
        p[3] = 0, p[4] = 0, p[5] = -1;
        p[6] = u, p[7] = w;
      }
  for (int i = 0; i < 4; i++)
    scene[i * 5] = model[i * 5] = 1; /* identity view_proj and model */
  scene[18] = -2;                    /* camera_pos.z */
  for (int i = 0; i < 16; i++) {
    scene[20 + i * 4 + 0] = (float)(i % 4) - 1.5f;
    scene[20 + i * 4 + 2] = -1;
    for (int k = 0; k < 3; k++)
      scene[84 + i * 4 + k] = 0.5f;
  }
  VkBuffer vb = buffer(&c, VK_BUFFER_USAGE_VERTEX_BUFFER_BIT, verts, VERTICES * 8 * sizeof(float));
  VkBuffer ub = buffer(&c, VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT, scene, sizeof scene);

  VkDescriptorPoolSize sizes[2] = {{VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1},
                                   {VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1}};
  VkDescriptorPoolCreateInfo dpi = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                    .maxSets = 1,
                                    .poolSizeCount = 2,
                                    .pPoolSizes = sizes};
  CHECK(vkCreateDescriptorPool(dev, &dpi, NULL, &dpool));
  VkDescriptorSetAllocateInfo dsa = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                     .descriptorPool = dpool,
                                     .descriptorSetCount = 1,
                                     .pSetLayouts = &o->set_layout};
  CHECK(vkAllocateDescriptorSets(dev, &dsa, &set));
  VkDescriptorBufferInfo dbi = {ub, 0, VK_WHOLE_SIZE};
  VkDescriptorImageInfo dii = {VK_NULL_HANDLE, tex_view, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL};
  VkWriteDescriptorSet writes[2] = {{.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                     .dstSet = set,
                                     .dstBinding = 0,
                                     .descriptorCount = 1,
                                     .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
                                     .pBufferInfo = &dbi},
                                    {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
                                     .dstSet = set,
                                     .dstBinding = 1,
                                     .descriptorCount = 1,
                                     .descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
                                     .pImageInfo = &dii}};
  vkUpdateDescriptorSets(dev, 2, writes, 0, NULL);

  VkCommandPoolCreateInfo cpi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                 .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                 .queueFamilyIndex = v->family};
  CHECK(vkCreateCommandPool(dev, &cpi, NULL, &pool));
  VkCommandBufferAllocateInfo cba = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                     .commandPool = pool,
                                     .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                     .commandBufferCount = 1};
  CHECK(vkAllocateCommandBuffers(dev, &cba, &cb));
  VkQueryPoolCreateInfo qpi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                               .queryType = VK_QUERY_TYPE_TIMESTAMP,
                               .queryCount = 2};
  CHECK(vkCreateQueryPool(dev, &qpi, NULL, &queries));

  /* The texture: white, then readable by the shader. */
  VkCommandBufferBeginInfo begin = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  VkImageSubresourceRange range = {VK_IMAGE_ASPECT_COLOR_BIT, 0, 1, 0, 1};
  VkClearColorValue white = {.float32 = {1, 1, 1, 1}};
  VkImageMemoryBarrier to_dst = {.sType = VK_STRUCTURE_TYPE_IMAGE_MEMORY_BARRIER,
                                 .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                 .oldLayout = VK_IMAGE_LAYOUT_UNDEFINED,
                                 .newLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL,
                                 .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                 .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                 .image = tex,
                                 .subresourceRange = range};
  VkImageMemoryBarrier to_read = to_dst;
  to_read.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
  to_read.dstAccessMask = VK_ACCESS_SHADER_READ_BIT;
  to_read.oldLayout = VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL;
  to_read.newLayout = VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL;
  CHECK(vkBeginCommandBuffer(cb, &begin));
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0,
                       NULL, 0, NULL, 1, &to_dst);
  vkCmdClearColorImage(cb, tex, VK_IMAGE_LAYOUT_TRANSFER_DST_OPTIMAL, &white, 1, &range);
  vkCmdPipelineBarrier(cb, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT, 0,
                       0, NULL, 0, NULL, 1, &to_read);
  CHECK(vkEndCommandBuffer(cb));
  submit(dev, q, cb);

  VkClearValue clears[2] = {{.color = {.float32 = {0, 0, 0, 1}}}, {.depthStencil = {1, 0}}};
  VkRenderPassBeginInfo rp = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_BEGIN_INFO,
                              .renderPass = o->pass,
                              .framebuffer = fb,
                              .renderArea = {{0, 0}, {W, W}},
                              .clearValueCount = 2,
                              .pClearValues = clears};
  VkViewport viewport = {0, 0, W, W, 0, 1};
  VkRect2D scissor = {{0, 0}, {W, W}};
  VkDeviceSize zero = 0;
  /* One rep of each first, unmeasured: the first use may do one-time work. */
  for (int rep = -1; rep < REPS; rep++)
    for (int p = 0; p < 2; p++) {
      uint64_t ts[2];
      CHECK(vkResetCommandBuffer(cb, 0));
      CHECK(vkBeginCommandBuffer(cb, &begin));
      vkCmdResetQueryPool(cb, queries, 0, 2);
      vkCmdBeginRenderPass(cb, &rp, VK_SUBPASS_CONTENTS_INLINE);
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_GRAPHICS, pipelines[p]);
      vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_GRAPHICS, o->layout, 0, 1, &set, 0, NULL);
      vkCmdPushConstants(cb, o->layout, VK_SHADER_STAGE_VERTEX_BIT, 0, sizeof model, model);
      vkCmdSetViewport(cb, 0, 1, &viewport);
      vkCmdSetScissor(cb, 0, 1, &scissor);
      vkCmdBindVertexBuffers(cb, 0, 1, &vb, &zero);
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, 0);
      for (uint32_t d = 0; d < draws; d++)
        vkCmdDraw(cb, VERTICES, 1, 0, 0);
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, 1);
      vkCmdEndRenderPass(cb);
      CHECK(vkEndCommandBuffer(cb));
      submit(dev, q, cb);
      CHECK(vkGetQueryPoolResults(dev, queries, 0, 2, sizeof ts, ts, sizeof ts[0],
                                  VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
      if (rep >= 0)
        ns[p][rep] = (uint64_t)((double)(ts[1] - ts[0]) * v->timestamp_period);
    }
  qsort(ns[0], REPS, sizeof ns[0][0], cmp_u64);
  qsort(ns[1], REPS, sizeof ns[1][0], cmp_u64);
  printf("gpl_draws=%u\ngpl_draw_vertices=%u\ngpl_draw_linked_us=%.1f\n"
         "gpl_draw_optimized_us=%.1f\ngpl_draw_linked_over_optimized=%.3f\n",
         draws, VERTICES, ns[0][REPS / 2] / 1e3, ns[1][REPS / 2] / 1e3,
         ns[1][REPS / 2] ? (double)ns[0][REPS / 2] / (double)ns[1][REPS / 2] : 0);

  vkDestroyQueryPool(dev, queries, NULL);
  vkDestroyCommandPool(dev, pool, NULL);
  vkDestroyDescriptorPool(dev, dpool, NULL);
  vkDestroyBuffer(dev, vb, NULL);
  vkDestroyBuffer(dev, ub, NULL);
  vkDestroyFramebuffer(dev, fb, NULL);
  vkDestroyImageView(dev, color_view, NULL);
  vkDestroyImageView(dev, depth_view, NULL);
  vkDestroyImageView(dev, tex_view, NULL);
  vkDestroyImage(dev, color, NULL);
  vkDestroyImage(dev, depth, NULL);
  vkDestroyImage(dev, tex, NULL);
  for (uint32_t i = 0; i < c.n_memory; i++)
    vkFreeMemory(dev, c.memory[i], NULL);
  free(verts);
}
