/* Describe + hash cost of typical create infos, objects pre-encoded (what
 * the tier-2 deep-hash path pays on a hit). Target: <= 1 us for a typical
 * graphics pipeline. No Vulkan device: create infos are plain structs and
 * handles are fake. Each case runs hot (the same create info described in
 * a loop) and cold (8 MB written between two calls, as a driver's
 * pipeline creation would between two of a program's): a start pays the
 * cold figure. Prints key=value lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <pcache/pcache.h>

#include "client/desc.h"

#define N_OBJ 16

static struct {
  uint64_t handle;
  pcache__desc_object *object;
} objs[N_OBJ];
static int n_objs;

static const pcache__desc_object *find(void *ctx, uint64_t h) {
  (void)ctx;
  for (int i = 0; i < n_objs; i++)
    if (objs[i].handle == h)
      return objs[i].object;
  return NULL;
}
static const pcache__desc_object *lk_module(void *c, VkShaderModule h) {
  return find(c, (uint64_t)h);
}
static const pcache__desc_object *lk_set(void *c, VkDescriptorSetLayout h) {
  return find(c, (uint64_t)h);
}
static const pcache__desc_object *lk_layout(void *c, VkPipelineLayout h) {
  return find(c, (uint64_t)h);
}
static const pcache__desc_object *lk_rp(void *c, VkRenderPass h) { return find(c, (uint64_t)h); }
static const pcache__desc_object *lk_sampler(void *c, VkSampler h) { return find(c, (uint64_t)h); }
static const pcache__desc_lookup lookup = {NULL,  lk_module,  lk_set, lk_layout,
                                           lk_rp, lk_sampler, NULL};

static uint64_t add(int r, pcache__desc_object **o) {
  if (r != 0) {
    fprintf(stderr, "object: %s\n", pcache_strerror(r));
    exit(1);
  }
  objs[n_objs].handle = 0x1000 + 16 * (uint64_t)n_objs;
  objs[n_objs].object = *o;
  return objs[n_objs++].handle;
}

static double now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* Between the calls of a cold run, this much memory is written: more than
 * the L2 of most CPUs, so the create info, the object records and the
 * describer's buffer come from L3, as after a driver's pipeline creation
 * (in a real start, 15-40 us of driver work separate two describes). */
#define COLD_BYTES (8u << 20)
static unsigned char *cold_mem;

static void chill(void) {
  for (size_t i = 0; i < COLD_BYTES; i += 64)
    cold_mem[i]++;
}

/* Best of 5 runs of iters calls; cold: each call timed alone after
 * chill(), the median of the run taken. */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void bench(const char *name, const VkGraphicsPipelineCreateInfo *g,
                  const VkComputePipelineCreateInfo *c, long iters, int cold) {
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  double best = 1e30;
  uint64_t sink = 0;
  pcache__desc_buf_init(&buf);
  for (int run = 0; run < 5; run++) {
    static double each[2048];
    long n = cold ? (iters < 2048 ? iters : 2048) : iters;
    double t0 = now_ns(), ns;
    for (long i = 0; i < n; i++) {
      double t1;
      if (cold) {
        chill();
        t1 = now_ns();
      }
      int r = g ? pcache__desc_graphics(g, &lookup, &buf, &keys)
                : pcache__desc_compute(c, &lookup, &buf, &keys);
      if (r != 0) {
        fprintf(stderr, "%s: %s\n", name, pcache_strerror(r));
        exit(1);
      }
      if (cold)
        each[i] = now_ns() - t1;
      sink += keys.state_hash.bytes[0];
    }
    if (cold) {
      qsort(each, (size_t)n, sizeof each[0], cmp_double);
      ns = each[n / 2];
    } else {
      ns = (now_ns() - t0) / (double)iters;
    }
    if (ns < best)
      best = ns;
  }
  printf("bench=%s%s ns_per_op=%.1f desc_bytes=%zu iters=%ld sink=%llu\n", name,
         cold ? "_cold" : "", best, buf.size, cold && iters > 2048 ? 2048L : iters,
         (unsigned long long)(sink & 1));
  pcache__desc_buf_release(&buf);
}

int main(int argc, char **argv) {
  long iters = argc > 1 ? atol(argv[1]) : 200000;
  pcache__desc_object *o;
  static uint32_t vs_code[256], fs_code[512], cs_code[384];
  for (int i = 0; i < 512; i++) {
    if (i < 256)
      vs_code[i] = 0x07230203u ^ (uint32_t)i;
    fs_code[i] = 0x07230203u ^ (uint32_t)(i * 7);
    if (i < 384)
      cs_code[i] = 0x07230203u ^ (uint32_t)(i * 13);
  }
  VkShaderModuleCreateInfo smi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = sizeof(vs_code),
                                  .pCode = vs_code};
  VkShaderModule vs = (VkShaderModule)add(pcache__desc_shader_module(&smi, &o), &o);
  smi.codeSize = sizeof(fs_code);
  smi.pCode = fs_code;
  VkShaderModule fs = (VkShaderModule)add(pcache__desc_shader_module(&smi, &o), &o);
  smi.codeSize = sizeof(cs_code);
  smi.pCode = cs_code;
  VkShaderModule cs = (VkShaderModule)add(pcache__desc_shader_module(&smi, &o), &o);

  VkSamplerCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
                            .magFilter = VK_FILTER_LINEAR,
                            .minFilter = VK_FILTER_LINEAR,
                            .maxLod = 16};
  VkSampler sampler = (VkSampler)add(pcache__desc_sampler(&si, &o), &o);
  VkDescriptorSetLayoutBinding b[] = {
      {0, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1, VK_SHADER_STAGE_ALL_GRAPHICS, NULL},
      {1, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, VK_SHADER_STAGE_FRAGMENT_BIT, &sampler},
      {2, VK_DESCRIPTOR_TYPE_SAMPLED_IMAGE, 4, VK_SHADER_STAGE_FRAGMENT_BIT, NULL},
  };
  VkDescriptorSetLayoutCreateInfo sli = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, .bindingCount = 3,
      .pBindings = b};
  VkDescriptorSetLayout set = (VkDescriptorSetLayout)add(
      pcache__desc_set_layout(&sli, &lookup, &o), &o);
  VkDescriptorSetLayout sets[] = {set, set};
  VkPushConstantRange pc = {VK_SHADER_STAGE_ALL, 0, 64};
  VkPipelineLayoutCreateInfo pli = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .setLayoutCount = 2,
                                    .pSetLayouts = sets,
                                    .pushConstantRangeCount = 1,
                                    .pPushConstantRanges = &pc};
  VkPipelineLayout layout = (VkPipelineLayout)add(
      pcache__desc_pipeline_layout(&pli, &lookup, &o), &o);
  VkAttachmentDescription att[] = {
      {0, VK_FORMAT_B8G8R8A8_SRGB, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_STORE, 0, 0, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_PRESENT_SRC_KHR},
      {0, VK_FORMAT_D32_SFLOAT, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, 0, 0, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL}};
  VkAttachmentReference cref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference dref = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkSubpassDescription sp = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                             .colorAttachmentCount = 1,
                             .pColorAttachments = &cref,
                             .pDepthStencilAttachment = &dref};
  VkRenderPassCreateInfo rpi = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                                .attachmentCount = 2,
                                .pAttachments = att,
                                .subpassCount = 1,
                                .pSubpasses = &sp};
  VkRenderPass rp = (VkRenderPass)add(pcache__desc_render_pass(&rpi, &o), &o);

  /* A typical engine pipeline: two stages with a couple of specialization
   * constants, three vertex attributes, depth test, one blended target,
   * viewport and scissor dynamic. */
  uint32_t spec_data[2] = {1, 4};
  VkSpecializationMapEntry spec_entries[2] = {{0, 0, 4}, {1, 4, 4}};
  VkSpecializationInfo spec = {2, spec_entries, 8, spec_data};
  VkPipelineShaderStageCreateInfo stages[2] = {
      {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
       .stage = VK_SHADER_STAGE_VERTEX_BIT,
       .module = vs,
       .pName = "main"},
      {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
       .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
       .module = fs,
       .pName = "main",
       .pSpecializationInfo = &spec}};
  VkVertexInputBindingDescription vb = {0, 32, VK_VERTEX_INPUT_RATE_VERTEX};
  VkVertexInputAttributeDescription va[3] = {{0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0},
                                             {1, 0, VK_FORMAT_R32G32B32_SFLOAT, 12},
                                             {2, 0, VK_FORMAT_R32G32_SFLOAT, 24}};
  VkPipelineVertexInputStateCreateInfo vi = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
      .vertexBindingDescriptionCount = 1,
      .pVertexBindingDescriptions = &vb,
      .vertexAttributeDescriptionCount = 3,
      .pVertexAttributeDescriptions = va};
  VkPipelineInputAssemblyStateCreateInfo ia = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
  VkPipelineViewportStateCreateInfo vp = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .scissorCount = 1};
  VkPipelineRasterizationStateCreateInfo rs = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .polygonMode = VK_POLYGON_MODE_FILL,
      .cullMode = VK_CULL_MODE_BACK_BIT,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1};
  VkPipelineMultisampleStateCreateInfo ms = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
  VkPipelineDepthStencilStateCreateInfo ds = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
      .depthTestEnable = VK_TRUE,
      .depthWriteEnable = VK_TRUE,
      .depthCompareOp = VK_COMPARE_OP_LESS_OR_EQUAL};
  VkPipelineColorBlendAttachmentState cba = {
      VK_TRUE, VK_BLEND_FACTOR_SRC_ALPHA, VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA, VK_BLEND_OP_ADD,
      VK_BLEND_FACTOR_ONE, VK_BLEND_FACTOR_ZERO, VK_BLEND_OP_ADD, 0xf};
  VkPipelineColorBlendStateCreateInfo cb = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &cba};
  VkDynamicState dyn[] = {VK_DYNAMIC_STATE_VIEWPORT, VK_DYNAMIC_STATE_SCISSOR};
  VkPipelineDynamicStateCreateInfo dy = {.sType =
                                             VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
                                         .dynamicStateCount = 2,
                                         .pDynamicStates = dyn};
  VkGraphicsPipelineCreateInfo gi = {.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                     .stageCount = 2,
                                     .pStages = stages,
                                     .pVertexInputState = &vi,
                                     .pInputAssemblyState = &ia,
                                     .pViewportState = &vp,
                                     .pRasterizationState = &rs,
                                     .pMultisampleState = &ms,
                                     .pDepthStencilState = &ds,
                                     .pColorBlendState = &cb,
                                     .pDynamicState = &dy,
                                     .layout = layout,
                                     .renderPass = rp,
                                     .basePipelineIndex = -1};
  VkComputePipelineCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = cs,
                .pName = "main"},
      .layout = layout};

  cold_mem = calloc(1, COLD_BYTES);
  if (!cold_mem)
    return 1;
  for (int cold = 0; cold < 2; cold++) {
    gi.pNext = NULL;
    gi.renderPass = rp;
    bench("desc_graphics", &gi, NULL, iters, cold);
    /* Dynamic rendering instead of a render pass. */
    static const VkFormat color = VK_FORMAT_B8G8R8A8_SRGB;
    static VkPipelineRenderingCreateInfo ri = {.sType =
                                                   VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
                                               .colorAttachmentCount = 1,
                                               .pColorAttachmentFormats = &color,
                                               .depthAttachmentFormat = VK_FORMAT_D32_SFLOAT};
    gi.pNext = &ri;
    gi.renderPass = VK_NULL_HANDLE;
    bench("desc_graphics_dynamic_rendering", &gi, NULL, iters, cold);
    bench("desc_compute", NULL, &ci, iters, cold);
  }
  free(cold_mem);
  for (int i = 0; i < n_objs; i++)
    pcache__desc_object_free(objs[i].object);
  return 0;
}
