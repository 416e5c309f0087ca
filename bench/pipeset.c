#include "pipeset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "blur_comp.h"
#include "particles_comp.h"
#include "pbr_frag.h"
#include "pbr_vert.h"
#include "reduce_comp.h"
#include "unlit_frag.h"
#include "unlit_vert.h"

/* ------------------------------------------------------------- device */

void bench_vk_init(bench_vk *vk, const char *app_name) {
  VkApplicationInfo app = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = app_name,
      .applicationVersion = 1,
      .pEngineName = "pcache-bench",
      .apiVersion = VK_API_VERSION_1_3,
  };
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkPhysicalDevice devs[16];
  uint32_t ndev = 16, index = 0;
  const char *env = getenv("PCACHE_BENCH_DEVICE");
  VkResult vr;

  memset(vk, 0, sizeof *vk);
  vr = vkCreateInstance(&ici, NULL, &vk->instance);
  if (vr != VK_SUCCESS)
    bench_die("vkCreateInstance: %d", (int)vr);
  vr = vkEnumeratePhysicalDevices(vk->instance, &ndev, devs);
  if ((vr != VK_SUCCESS && vr != VK_INCOMPLETE) || ndev == 0)
    bench_die("no Vulkan device (%d)", (int)vr);
  if (env && *env)
    index = (uint32_t)atoi(env);
  if (index >= ndev)
    bench_die("PCACHE_BENCH_DEVICE=%u but only %u devices", index, ndev);
  vk->physical_device = devs[index];
  vkGetPhysicalDeviceProperties(vk->physical_device, &vk->props);
  vk->api_version = vk->props.apiVersion;

  if (vk->api_version >= VK_API_VERSION_1_2) {
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                      .pNext = &vk->driver};
    vk->driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
    vkGetPhysicalDeviceProperties2(vk->physical_device, &p2);
    vk->driver.pNext = NULL;
  }

  VkPhysicalDeviceVulkan13Features f13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  if (vk->api_version >= VK_API_VERSION_1_3) {
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &f13};
    vkGetPhysicalDeviceFeatures2(vk->physical_device, &f2);
    vk->dynamic_rendering = f13.dynamicRendering == VK_TRUE;
    vk->cache_control = f13.pipelineCreationCacheControl == VK_TRUE;
    vk->creation_feedback = 1; /* core in 1.3 */
  }
  /* Enable only what the generator and libpcache use. */
  VkPhysicalDeviceVulkan13Features want13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
      .dynamicRendering = vk->dynamic_rendering ? VK_TRUE : VK_FALSE,
      /* Only allows FAIL_ON_PIPELINE_COMPILE_REQUIRED: libpcache's driver
       * first (bench_warm's pcache modes); the plain modes never pass it. */
      .pipelineCreationCacheControl = vk->cache_control ? VK_TRUE : VK_FALSE};
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = 0,
                                 .queueCount = 1,
                                 .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = vk->api_version >= VK_API_VERSION_1_3 ? &want13 : NULL,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  vr = vkCreateDevice(vk->physical_device, &dci, NULL, &vk->device);
  if (vr != VK_SUCCESS)
    bench_die("vkCreateDevice: %d", (int)vr);
}

void bench_vk_fini(bench_vk *vk) {
  if (vk->device)
    vkDestroyDevice(vk->device, NULL);
  if (vk->instance)
    vkDestroyInstance(vk->instance, NULL);
  memset(vk, 0, sizeof *vk);
}

static const char *driver_kind(const bench_vk *vk) {
  switch (vk->driver.driverID) {
  case VK_DRIVER_ID_NVIDIA_PROPRIETARY:
    return "nvidia";
  case VK_DRIVER_ID_MESA_RADV:
  case VK_DRIVER_ID_INTEL_OPEN_SOURCE_MESA:
  case VK_DRIVER_ID_MESA_LLVMPIPE:
  case VK_DRIVER_ID_MESA_TURNIP:
  case VK_DRIVER_ID_MESA_V3DV:
  case VK_DRIVER_ID_MESA_PANVK:
  case VK_DRIVER_ID_MESA_VENUS:
  case VK_DRIVER_ID_MESA_DOZEN:
  case VK_DRIVER_ID_MESA_NVK:
    return "mesa";
  default:
    break;
  }
  if (vk->props.vendorID == 0x10de)
    return "nvidia";
  if (strstr(vk->driver.driverInfo, "Mesa"))
    return "mesa";
  return "other";
}

void bench_vk_print(const bench_vk *vk) {
  char buf[64];
  bench_kv_str(NULL, "device_name", vk->props.deviceName);
  snprintf(buf, sizeof buf, "0x%04x", vk->props.vendorID);
  bench_kv_str(NULL, "vendor_id", buf);
  snprintf(buf, sizeof buf, "0x%04x", vk->props.deviceID);
  bench_kv_str(NULL, "device_id", buf);
  bench_kv_u64(NULL, "driver_id", (uint64_t)vk->driver.driverID);
  bench_kv_str(NULL, "driver_name", vk->driver.driverName[0] ? vk->driver.driverName : "unknown");
  bench_kv_str(NULL, "driver_info", vk->driver.driverInfo[0] ? vk->driver.driverInfo : "unknown");
  snprintf(buf, sizeof buf, "%u.%u.%u", VK_API_VERSION_MAJOR(vk->api_version),
           VK_API_VERSION_MINOR(vk->api_version), VK_API_VERSION_PATCH(vk->api_version));
  bench_kv_str(NULL, "api_version", buf);
  bench_kv_str(NULL, "driver_kind", driver_kind(vk));
}

/* ------------------------------------------------------------ variants */

enum { SET_UNLIT, SET_PBR, SET_COMPUTE, SET_COUNT };
enum { KERNEL_BLUR, KERNEL_REDUCE, KERNEL_PARTICLES, KERNEL_COUNT };
enum { MOD_UNLIT_VS, MOD_UNLIT_FS, MOD_PBR_VS, MOD_PBR_FS, MOD_BLUR, MOD_REDUCE, MOD_PARTICLES,
       MOD_COUNT };

static const VkFormat color_formats[] = {
    VK_FORMAT_R8G8B8A8_UNORM,
    VK_FORMAT_B8G8R8A8_SRGB,
    VK_FORMAT_R16G16B16A16_SFLOAT,
    VK_FORMAT_A2B10G10R10_UNORM_PACK32,
};
static const char *const color_names[] = {"rgba8", "bgra8srgb", "rgba16f", "a2b10g10r10"};
static const VkFormat depth_formats[] = {VK_FORMAT_D32_SFLOAT, VK_FORMAT_D16_UNORM};
static const VkSampleCountFlagBits sample_counts[] = {VK_SAMPLE_COUNT_1_BIT, VK_SAMPLE_COUNT_4_BIT};
static const VkPrimitiveTopology topologies[] = {VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST,
                                                 VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP,
                                                 VK_PRIMITIVE_TOPOLOGY_LINE_LIST};
static const char *const topology_names[] = {"tris", "strip", "lines"};
static const char *const blend_names[] = {"opaque", "alpha", "add"};
static const uint32_t workgroup_sizes[] = {32, 64, 128, 256};

#define N_COLOR (sizeof color_formats / sizeof color_formats[0])
#define N_DEPTH (sizeof depth_formats / sizeof depth_formats[0])
#define N_SAMPLES (sizeof sample_counts / sizeof sample_counts[0])
#define N_RENDER_PASSES (N_COLOR * N_DEPTH * N_SAMPLES)

/* Every structure one create info points at, kept together so the
 * pointers stay valid for the life of the set. */
typedef struct bench_pipe {
  int compute;
  char name[96];
  VkGraphicsPipelineCreateInfo gp;
  VkComputePipelineCreateInfo cp;
  VkPipelineShaderStageCreateInfo stages[2];
  VkSpecializationInfo spec[2];
  VkSpecializationMapEntry map[2][5];
  uint32_t spec_data[2][5];
  VkPipelineVertexInputStateCreateInfo vi;
  VkVertexInputBindingDescription vb;
  VkVertexInputAttributeDescription va[4];
  VkPipelineInputAssemblyStateCreateInfo ia;
  VkPipelineViewportStateCreateInfo vp;
  VkPipelineRasterizationStateCreateInfo rs;
  VkPipelineMultisampleStateCreateInfo ms;
  VkPipelineDepthStencilStateCreateInfo ds;
  VkPipelineColorBlendAttachmentState cba;
  VkPipelineColorBlendStateCreateInfo cb;
  VkPipelineDynamicStateCreateInfo dyn;
  VkPipelineRenderingCreateInfo rendering;
  VkFormat color_format;
} bench_pipe;

struct bench_pipeset {
  const bench_vk *vk;
  pcache_device *pdev;
  uint32_t n;
  bench_pipe *pipes;
  VkShaderModule modules[MOD_COUNT];
  VkDescriptorSetLayout set_layouts[SET_COUNT];
  VkPipelineLayout layouts[SET_COUNT];
  VkRenderPass render_passes[N_RENDER_PASSES];
};

static const VkDynamicState dynamic_states[] = {VK_DYNAMIC_STATE_VIEWPORT,
                                                VK_DYNAMIC_STATE_SCISSOR};

/* --------------------------------------------------------------- objects */

static void check(VkResult vr, const char *what) {
  if (vr != VK_SUCCESS)
    bench_die("%s: VkResult %d", what, (int)vr);
}

static VkShaderModule make_module(bench_pipeset *set, const uint32_t *code, size_t size) {
  VkShaderModuleCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = size,
                                   .pCode = code};
  VkShaderModule m;
  if (set->pdev)
    check(pcache_create_shader_module(set->pdev, &info, NULL, &m), "create shader module");
  else
    check(vkCreateShaderModule(set->vk->device, &info, NULL, &m), "vkCreateShaderModule");
  return m;
}

static void make_layout(bench_pipeset *set, int which, const VkDescriptorSetLayoutBinding *b,
                        uint32_t nb, const VkPushConstantRange *push) {
  VkDescriptorSetLayoutCreateInfo dsl = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                         .bindingCount = nb,
                                         .pBindings = b};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pSetLayouts = &set->set_layouts[which],
                                   .pushConstantRangeCount = push ? 1 : 0,
                                   .pPushConstantRanges = push};
  if (set->pdev) {
    check(pcache_create_descriptor_set_layout(set->pdev, &dsl, NULL, &set->set_layouts[which]),
          "create set layout");
    check(pcache_create_pipeline_layout(set->pdev, &pl, NULL, &set->layouts[which]),
          "create pipeline layout");
  } else {
    check(vkCreateDescriptorSetLayout(set->vk->device, &dsl, NULL, &set->set_layouts[which]),
          "vkCreateDescriptorSetLayout");
    check(vkCreatePipelineLayout(set->vk->device, &pl, NULL, &set->layouts[which]),
          "vkCreatePipelineLayout");
  }
}

static void make_objects(bench_pipeset *set) {
  set->modules[MOD_UNLIT_VS] = make_module(set, spv_unlit_vert, sizeof spv_unlit_vert);
  set->modules[MOD_UNLIT_FS] = make_module(set, spv_unlit_frag, sizeof spv_unlit_frag);
  set->modules[MOD_PBR_VS] = make_module(set, spv_pbr_vert, sizeof spv_pbr_vert);
  set->modules[MOD_PBR_FS] = make_module(set, spv_pbr_frag, sizeof spv_pbr_frag);
  set->modules[MOD_BLUR] = make_module(set, spv_blur_comp, sizeof spv_blur_comp);
  set->modules[MOD_REDUCE] = make_module(set, spv_reduce_comp, sizeof spv_reduce_comp);
  set->modules[MOD_PARTICLES] = make_module(set, spv_particles_comp, sizeof spv_particles_comp);

  const VkShaderStageFlags vf = VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT;
  const VkShaderStageFlags fs = VK_SHADER_STAGE_FRAGMENT_BIT;
  const VkDescriptorSetLayoutBinding unlit[] = {
      {0, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1, VK_SHADER_STAGE_VERTEX_BIT, NULL},
      {1, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, fs, NULL},
  };
  const VkDescriptorSetLayoutBinding pbr[] = {
      {0, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1, vf, NULL},
      {1, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1, fs, NULL},
      {2, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, fs, NULL},
      {3, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, fs, NULL},
      {4, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, fs, NULL},
      {5, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, fs, NULL},
      {6, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, fs, NULL},
  };
  const VkDescriptorSetLayoutBinding comp[] = {
      {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL},
      {1, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL},
      {2, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT, NULL},
  };
  const VkPushConstantRange push = {fs, 0, 32};
  make_layout(set, SET_UNLIT, unlit, 2, NULL);
  make_layout(set, SET_PBR, pbr, 7, &push);
  make_layout(set, SET_COMPUTE, comp, 3, NULL);
}

static VkRenderPass render_pass(bench_pipeset *set, unsigned color, unsigned depth,
                                unsigned samples) {
  unsigned idx = (color * N_DEPTH + depth) * N_SAMPLES + samples;
  if (set->render_passes[idx])
    return set->render_passes[idx];
  VkAttachmentDescription att[2] = {
      {0, color_formats[color], sample_counts[samples], VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_STORE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL},
      {0, depth_formats[depth], sample_counts[samples], VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL},
  };
  VkAttachmentReference cref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference dref = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkSubpassDescription sub = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                              .colorAttachmentCount = 1,
                              .pColorAttachments = &cref,
                              .pDepthStencilAttachment = &dref};
  VkRenderPassCreateInfo info = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                                 .attachmentCount = 2,
                                 .pAttachments = att,
                                 .subpassCount = 1,
                                 .pSubpasses = &sub};
  if (set->pdev)
    check(pcache_create_render_pass(set->pdev, &info, NULL, &set->render_passes[idx]),
          "create render pass");
  else
    check(vkCreateRenderPass(set->vk->device, &info, NULL, &set->render_passes[idx]),
          "vkCreateRenderPass");
  return set->render_passes[idx];
}

/* -------------------------------------------------------------- pipelines */

static void add_spec(bench_pipe *p, int stage, const uint32_t *values, uint32_t count) {
  for (uint32_t k = 0; k < count; k++) {
    p->spec_data[stage][k] = values[k];
    p->map[stage][k] = (VkSpecializationMapEntry){k, k * 4, 4};
  }
  p->spec[stage] = (VkSpecializationInfo){count, p->map[stage], count * 4, p->spec_data[stage]};
  p->stages[stage].pSpecializationInfo = &p->spec[stage];
}

static void stage(bench_pipe *p, int i, VkShaderStageFlagBits bit, VkShaderModule m) {
  p->stages[i] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = bit,
      .module = m,
      .pName = "main"};
}

static void build_compute(bench_pipeset *set, bench_pipe *p, uint32_t c) {
  static const char *const names[] = {"blur", "reduce", "particles"};
  static const int modules[] = {MOD_BLUR, MOD_REDUCE, MOD_PARTICLES};
  unsigned kernel = c % KERNEL_COUNT;
  uint32_t wg = workgroup_sizes[(c / KERNEL_COUNT) % 4];
  uint32_t second = 1 + (c / (KERNEL_COUNT * 4)) % 16; /* radius / per-thread / sub-steps */
  uint32_t values[2] = {wg, second};

  p->compute = 1;
  stage(p, 0, VK_SHADER_STAGE_COMPUTE_BIT, set->modules[modules[kernel]]);
  add_spec(p, 0, values, 2);
  p->cp = (VkComputePipelineCreateInfo){.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
                                        .stage = p->stages[0],
                                        .layout = set->layouts[SET_COMPUTE],
                                        .basePipelineIndex = -1};
  snprintf(p->name, sizeof p->name, "compute %s wg=%u k=%u", names[kernel], wg, second);
}

static void build_graphics(bench_pipeset *set, bench_pipe *p, uint32_t i) {
  /* Mixed-radix digits of i: distinct i give distinct state up to the
   * product of the radices (9216). */
  uint32_t x = i;
  unsigned shader_set = x % 2; x /= 2;
  unsigned blend = x % 3; x /= 3;
  unsigned dynamic = x % 2; x /= 2;
  unsigned samples = x % N_SAMPLES; x /= N_SAMPLES;
  unsigned topo = x % 3; x /= 3;
  unsigned color = x % N_COLOR; x /= N_COLOR;
  unsigned depth = x % N_DEPTH; x /= N_DEPTH;
  unsigned spec = x % 16;

  if (!set->vk->dynamic_rendering)
    dynamic = 0;
  p->color_format = color_formats[color];

  if (shader_set == SET_UNLIT) {
    static const float cutoffs[] = {0.5f, 0.1f, 0.3f, 0.7f};
    uint32_t fs[2], vs[1] = {spec & 1};
    fs[0] = (spec >> 1) & 1;
    memcpy(&fs[1], &cutoffs[spec >> 2], 4);
    stage(p, 0, VK_SHADER_STAGE_VERTEX_BIT, set->modules[MOD_UNLIT_VS]);
    stage(p, 1, VK_SHADER_STAGE_FRAGMENT_BIT, set->modules[MOD_UNLIT_FS]);
    add_spec(p, 0, vs, 1);
    add_spec(p, 1, fs, 2);
    p->vb = (VkVertexInputBindingDescription){0, 36, VK_VERTEX_INPUT_RATE_VERTEX};
    p->va[0] = (VkVertexInputAttributeDescription){0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0};
    p->va[1] = (VkVertexInputAttributeDescription){1, 0, VK_FORMAT_R32G32_SFLOAT, 12};
    p->va[2] = (VkVertexInputAttributeDescription){2, 0, VK_FORMAT_R32G32B32A32_SFLOAT, 20};
    p->vi.vertexAttributeDescriptionCount = 3;
    snprintf(p->name, sizeof p->name, "unlit vc=%u at=%u", spec & 1, (spec >> 1) & 1);
  } else {
    static const uint32_t lights[] = {4, 8, 16, 32};
    /* Skinning and emission follow other digits: the state stays distinct
     * and every permutation is exercised. */
    uint32_t vs[1] = {topo == 0};
    uint32_t fs[4] = {lights[spec & 3], (spec >> 2) & 1, (spec >> 3) & 1, depth == 1};
    stage(p, 0, VK_SHADER_STAGE_VERTEX_BIT, set->modules[MOD_PBR_VS]);
    stage(p, 1, VK_SHADER_STAGE_FRAGMENT_BIT, set->modules[MOD_PBR_FS]);
    add_spec(p, 0, vs, 1);
    add_spec(p, 1, fs, 4);
    p->vb = (VkVertexInputBindingDescription){0, 48, VK_VERTEX_INPUT_RATE_VERTEX};
    p->va[0] = (VkVertexInputAttributeDescription){0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0};
    p->va[1] = (VkVertexInputAttributeDescription){1, 0, VK_FORMAT_R32G32B32_SFLOAT, 12};
    p->va[2] = (VkVertexInputAttributeDescription){2, 0, VK_FORMAT_R32G32_SFLOAT, 24};
    p->va[3] = (VkVertexInputAttributeDescription){3, 0, VK_FORMAT_R32G32B32A32_SFLOAT, 32};
    p->vi.vertexAttributeDescriptionCount = 4;
    snprintf(p->name, sizeof p->name, "pbr lights=%u nm=%u sh=%u", fs[0], fs[1], fs[2]);
  }
  size_t len = strlen(p->name);
  snprintf(p->name + len, sizeof p->name - len, " %s %s x%u %s %s d%u", dynamic ? "dyn" : "rp",
           color_names[color], (unsigned)sample_counts[samples], topology_names[topo],
           blend_names[blend], depth);

  p->vi.sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO;
  p->vi.vertexBindingDescriptionCount = 1;
  p->vi.pVertexBindingDescriptions = &p->vb;
  p->vi.pVertexAttributeDescriptions = p->va;
  p->ia = (VkPipelineInputAssemblyStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology = topologies[topo]};
  p->vp = (VkPipelineViewportStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .scissorCount = 1};
  p->rs = (VkPipelineRasterizationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .polygonMode = VK_POLYGON_MODE_FILL,
      .cullMode = blend ? VK_CULL_MODE_NONE : VK_CULL_MODE_BACK_BIT,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1.0f};
  p->ms = (VkPipelineMultisampleStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = sample_counts[samples]};
  p->ds = (VkPipelineDepthStencilStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
      .depthTestEnable = VK_TRUE,
      .depthWriteEnable = blend ? VK_FALSE : VK_TRUE,
      .depthCompareOp = VK_COMPARE_OP_LESS_OR_EQUAL,
      .maxDepthBounds = 1.0f};
  p->cba.colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT |
                          VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT;
  if (blend) {
    p->cba.blendEnable = VK_TRUE;
    p->cba.srcColorBlendFactor = blend == 1 ? VK_BLEND_FACTOR_SRC_ALPHA : VK_BLEND_FACTOR_ONE;
    p->cba.dstColorBlendFactor =
        blend == 1 ? VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA : VK_BLEND_FACTOR_ONE;
    p->cba.colorBlendOp = VK_BLEND_OP_ADD;
    p->cba.srcAlphaBlendFactor = VK_BLEND_FACTOR_ONE;
    p->cba.dstAlphaBlendFactor =
        blend == 1 ? VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA : VK_BLEND_FACTOR_ONE;
    p->cba.alphaBlendOp = VK_BLEND_OP_ADD;
  }
  p->cb = (VkPipelineColorBlendStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &p->cba};
  p->dyn = (VkPipelineDynamicStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
      .dynamicStateCount = 2,
      .pDynamicStates = dynamic_states};
  p->gp = (VkGraphicsPipelineCreateInfo){
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
      .stageCount = 2,
      .pStages = p->stages,
      .pVertexInputState = &p->vi,
      .pInputAssemblyState = &p->ia,
      .pViewportState = &p->vp,
      .pRasterizationState = &p->rs,
      .pMultisampleState = &p->ms,
      .pDepthStencilState = &p->ds,
      .pColorBlendState = &p->cb,
      .pDynamicState = &p->dyn,
      .layout = set->layouts[shader_set],
      .basePipelineIndex = -1};
  if (dynamic) {
    p->rendering = (VkPipelineRenderingCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
        .colorAttachmentCount = 1,
        .pColorAttachmentFormats = &p->color_format,
        .depthAttachmentFormat = depth_formats[depth]};
    p->gp.pNext = &p->rendering;
  } else {
    p->gp.renderPass = render_pass(set, color, depth, samples);
  }
}

bench_pipeset *bench_pipeset_create(const bench_vk *vk, pcache_device *pdev, uint32_t n) {
  bench_pipeset *set = calloc(1, sizeof *set);
  if (!set || !(set->pipes = calloc(n ? n : 1, sizeof *set->pipes)))
    bench_die("out of memory");
  set->vk = vk;
  set->pdev = pdev;
  set->n = n;
  make_objects(set);
  for (uint32_t i = 0; i < n; i++) {
    /* One pipeline in 16 is compute, as in a typical frame graph. */
    if (i % 16 == 15)
      build_compute(set, &set->pipes[i], i / 16);
    else
      build_graphics(set, &set->pipes[i], i);
  }
  return set;
}

void bench_pipeset_destroy(bench_pipeset *set) {
  VkDevice dev;
  if (!set)
    return;
  dev = set->vk->device;
  for (size_t i = 0; i < N_RENDER_PASSES; i++) {
    if (!set->render_passes[i])
      continue;
    if (set->pdev)
      pcache_destroy_render_pass(set->pdev, set->render_passes[i], NULL);
    else
      vkDestroyRenderPass(dev, set->render_passes[i], NULL);
  }
  for (int i = 0; i < SET_COUNT; i++) {
    if (set->pdev) {
      pcache_destroy_pipeline_layout(set->pdev, set->layouts[i], NULL);
      pcache_destroy_descriptor_set_layout(set->pdev, set->set_layouts[i], NULL);
    } else {
      vkDestroyPipelineLayout(dev, set->layouts[i], NULL);
      vkDestroyDescriptorSetLayout(dev, set->set_layouts[i], NULL);
    }
  }
  for (int i = 0; i < MOD_COUNT; i++) {
    if (set->pdev)
      pcache_destroy_shader_module(set->pdev, set->modules[i], NULL);
    else
      vkDestroyShaderModule(dev, set->modules[i], NULL);
  }
  free(set->pipes);
  free(set);
}

uint32_t bench_pipeset_count(const bench_pipeset *set) { return set->n; }

int bench_pipeset_is_compute(const bench_pipeset *set, uint32_t i) {
  return set->pipes[i].compute;
}

const VkGraphicsPipelineCreateInfo *bench_pipeset_graphics(const bench_pipeset *set, uint32_t i) {
  return &set->pipes[i].gp;
}

const VkComputePipelineCreateInfo *bench_pipeset_compute(const bench_pipeset *set, uint32_t i) {
  return &set->pipes[i].cp;
}

const char *bench_pipeset_name(const bench_pipeset *set, uint32_t i) {
  return set->pipes[i].name;
}
