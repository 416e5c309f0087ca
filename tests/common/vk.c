#include "vk.h"

#include <string.h>
#include <unistd.h>

#include "test.h"
#include "test_shaders.h"

/* With gpl, VK_EXT_graphics_pipeline_library too: 0 (and nothing made)
 * when the device lacks it. */
static int vk_init(test_vk *vk, int gpl) {
  uint32_t api = VK_API_VERSION_1_0, n = 0;
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "pcache-test"};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkPhysicalDevice devices[8];
  VkExtensionProperties exts[512];
  const char *enabled[3], *gpl_names[2];
  uint32_t n_enabled = 0, n_gpl = 0;
  VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT gpl_features = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                        .pNext = &gpl_features};
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};

  memset(vk, 0, sizeof *vk);
  if (vkEnumerateInstanceVersion(&api) != VK_SUCCESS)
    api = VK_API_VERSION_1_0;
  app.apiVersion = api >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : api;
  vk->api_version = app.apiVersion;
  ASSERT_VK(vkCreateInstance(&ici, NULL, &vk->instance));

  n = 8;
  ASSERT_VK(vkEnumeratePhysicalDevices(vk->instance, &n, devices));
  ASSERT_GT(n, 0);
  vk->physical_device = devices[0];
  /* Prefer the CPU driver: results must not depend on the machine's GPU. */
  for (uint32_t i = 0; i < n; i++) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(devices[i], &p);
    if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU) {
      vk->physical_device = devices[i];
      break;
    }
  }
  vkGetPhysicalDeviceProperties(vk->physical_device, &vk->props);

  n = 16;
  VkQueueFamilyProperties families[16];
  vkGetPhysicalDeviceQueueFamilyProperties(vk->physical_device, &n, families);
  for (vk->queue_family = 0; vk->queue_family < n; vk->queue_family++)
    if (families[vk->queue_family].queueFlags & VK_QUEUE_GRAPHICS_BIT)
      break;
  ASSERT_LT(vk->queue_family, n);
  qci.queueFamilyIndex = vk->queue_family;

  n = 512;
  vkEnumerateDeviceExtensionProperties(vk->physical_device, NULL, &n, exts);
  for (uint32_t i = 0; i < n; i++) {
    if (strcmp(exts[i].extensionName, VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME) == 0) {
      enabled[n_enabled++] = VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME;
      vk->creation_feedback = 1;
    }
    if (gpl && n_gpl < 2 &&
        (strcmp(exts[i].extensionName, VK_KHR_PIPELINE_LIBRARY_EXTENSION_NAME) == 0 ||
         strcmp(exts[i].extensionName, VK_EXT_GRAPHICS_PIPELINE_LIBRARY_EXTENSION_NAME) == 0))
      gpl_names[n_gpl++] = exts[i].extensionName;
  }
  if (gpl) {
    vkGetPhysicalDeviceFeatures2(vk->physical_device, &features);
    if (n_gpl != 2 || !gpl_features.graphicsPipelineLibrary) {
      vkDestroyInstance(vk->instance, NULL);
      memset(vk, 0, sizeof *vk);
      return 0;
    }
    gpl_features = (VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT,
        .graphicsPipelineLibrary = VK_TRUE};
    dci.pNext = &gpl_features;
    enabled[n_enabled++] = gpl_names[0];
    enabled[n_enabled++] = gpl_names[1];
  }
  if (vk->props.apiVersion >= VK_API_VERSION_1_3 && app.apiVersion >= VK_API_VERSION_1_3)
    vk->creation_feedback = 1;
  dci.enabledExtensionCount = n_enabled;
  dci.ppEnabledExtensionNames = enabled;
  ASSERT_VK(vkCreateDevice(vk->physical_device, &dci, NULL, &vk->device));
  return 1;
}

void test_vk_init(test_vk *vk) { (void)vk_init(vk, 0); }

int test_vk_init_gpl(test_vk *vk) { return vk_init(vk, 1); }

void test_vk_fini(test_vk *vk) {
  if (vk->device)
    vkDestroyDevice(vk->device, NULL);
  if (vk->instance)
    vkDestroyInstance(vk->instance, NULL);
  memset(vk, 0, sizeof *vk);
}

pcache_device_info test_vk_device_info(const test_vk *vk) {
  /* As an app fills it (PCACHE_STRUCT_INIT); built against the 0.1
   * header too (tests/abi), where the struct had no size or version. */
  pcache_device_info info = {.instance = vk->instance,
                             .physical_device = vk->physical_device,
                             .device = vk->device,
                             .creation_feedback = vk->creation_feedback,
#ifndef PCACHE_TEST_ABI_0_1
                             .struct_size = sizeof info,
                             .instance_api_version = vk->api_version
#endif
  };
  return info;
}

const uint32_t *test_vk_shader_code(const char *name, size_t *ret_size) {
  if (strcmp(name, "tri.vert") == 0) {
    *ret_size = sizeof test_shaders_tri_vert;
    return test_shaders_tri_vert;
  }
  if (strcmp(name, "tri.frag") == 0) {
    *ret_size = sizeof test_shaders_tri_frag;
    return test_shaders_tri_frag;
  }
  if (strcmp(name, "fill.comp") == 0) {
    *ret_size = sizeof test_shaders_fill_comp;
    return test_shaders_fill_comp;
  }
  TEST_FAIL_("no test shader %s", name);
}

/* Through pcache's wrappers when the objects have a pcache device, else
 * straight to Vulkan (the layer tests: a plain program). */
#define MAKE(o, wrapper, vk_create, info, ret)                                                     \
  ASSERT_VK((o)->device ? wrapper((o)->device, (info), NULL, (ret))                                \
                        : vk_create((o)->vk_device, (info), NULL, (ret)))
#define UNMAKE(o, wrapper, vk_destroy, handle)                                                     \
  ((o)->device ? wrapper((o)->device, (handle), NULL) : vk_destroy((o)->vk_device, (handle), NULL))

static VkShaderModule make_module(const test_objects *o, const uint32_t *code, size_t size) {
  VkShaderModuleCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = size,
                                 .pCode = code};
  VkShaderModule m;
  MAKE(o, pcache_create_shader_module, vkCreateShaderModule, &ci, &m);
  return m;
}

static void objects_create(test_objects *o) {
  VkDescriptorSetLayoutBinding bindings[2] = {
      {.binding = 0,
       .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
       .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_FRAGMENT_BIT},
      {.binding = 1,
       .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
       .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT},
  };
  VkDescriptorSetLayoutCreateInfo dsl = {.sType =
                                             VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                         .bindingCount = 2,
                                         .pBindings = bindings};
  VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_VERTEX_BIT, .size = 8};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pushConstantRangeCount = 1,
                                   .pPushConstantRanges = &push};
  VkAttachmentDescription color = {.format = VK_FORMAT_R8G8B8A8_UNORM,
                                   .samples = VK_SAMPLE_COUNT_1_BIT,
                                   .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
                                   .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
                                   .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
                                   .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
                                   .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
                                   .finalLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference ref = {.attachment = 0,
                               .layout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkSubpassDescription subpass = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                                  .colorAttachmentCount = 1,
                                  .pColorAttachments = &ref};
  VkRenderPassCreateInfo rp = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                               .attachmentCount = 1,
                               .pAttachments = &color,
                               .subpassCount = 1,
                               .pSubpasses = &subpass};

  o->vert = make_module(o, test_shaders_tri_vert, sizeof test_shaders_tri_vert);
  o->frag = make_module(o, test_shaders_tri_frag, sizeof test_shaders_tri_frag);
  o->comp = make_module(o, test_shaders_fill_comp, sizeof test_shaders_fill_comp);
  MAKE(o, pcache_create_descriptor_set_layout, vkCreateDescriptorSetLayout, &dsl, &o->set_layout);
  pl.pSetLayouts = &o->set_layout;
  MAKE(o, pcache_create_pipeline_layout, vkCreatePipelineLayout, &pl, &o->layout);
  MAKE(o, pcache_create_render_pass, vkCreateRenderPass, &rp, &o->render_pass);
}

void test_objects_create(test_objects *o, pcache_device *device) {
  memset(o, 0, sizeof *o);
  o->device = device;
  objects_create(o);
}

void test_objects_create_plain(test_objects *o, VkDevice device) {
  memset(o, 0, sizeof *o);
  o->vk_device = device;
  objects_create(o);
}

void test_objects_destroy(test_objects *o) {
  UNMAKE(o, pcache_destroy_render_pass, vkDestroyRenderPass, o->render_pass);
  UNMAKE(o, pcache_destroy_pipeline_layout, vkDestroyPipelineLayout, o->layout);
  UNMAKE(o, pcache_destroy_descriptor_set_layout, vkDestroyDescriptorSetLayout, o->set_layout);
  UNMAKE(o, pcache_destroy_shader_module, vkDestroyShaderModule, o->comp);
  UNMAKE(o, pcache_destroy_shader_module, vkDestroyShaderModule, o->frag);
  UNMAKE(o, pcache_destroy_shader_module, vkDestroyShaderModule, o->vert);
  memset(o, 0, sizeof *o);
}

void test_graphics_info(test_graphics *g, const test_objects *o, uint32_t variant) {
  memset(g, 0, sizeof *g);
  g->spec_value = 1.0f + (float)(variant >> 2) * 0.125f;
  g->spec_entry = (VkSpecializationMapEntry){.constantID = 0, .offset = 0, .size = sizeof(float)};
  g->spec = (VkSpecializationInfo){.mapEntryCount = 1,
                                   .pMapEntries = &g->spec_entry,
                                   .dataSize = sizeof(float),
                                   .pData = &g->spec_value};
  g->stages[0] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_VERTEX_BIT,
      .module = o->vert,
      .pName = "main"};
  g->stages[1] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
      .module = o->frag,
      .pName = "main",
      .pSpecializationInfo = &g->spec};
  g->vertex_input.sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO;
  g->input_assembly = (VkPipelineInputAssemblyStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology = (variant & 1) ? VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP
                                : VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
  g->viewport = (VkPipelineViewportStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .scissorCount = 1};
  g->raster = (VkPipelineRasterizationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .polygonMode = VK_POLYGON_MODE_FILL,
      .cullMode = VK_CULL_MODE_NONE,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1.0f};
  g->multisample = (VkPipelineMultisampleStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
  g->blend_attachment = (VkPipelineColorBlendAttachmentState){
      .blendEnable = (variant & 2) ? VK_TRUE : VK_FALSE,
      .srcColorBlendFactor = VK_BLEND_FACTOR_SRC_ALPHA,
      .dstColorBlendFactor = VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA,
      .colorBlendOp = VK_BLEND_OP_ADD,
      .srcAlphaBlendFactor = VK_BLEND_FACTOR_ONE,
      .dstAlphaBlendFactor = VK_BLEND_FACTOR_ZERO,
      .alphaBlendOp = VK_BLEND_OP_ADD,
      .colorWriteMask = 0xf};
  g->blend = (VkPipelineColorBlendStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &g->blend_attachment};
  g->dynamic_states[0] = VK_DYNAMIC_STATE_VIEWPORT;
  g->dynamic_states[1] = VK_DYNAMIC_STATE_SCISSOR;
  g->dynamic = (VkPipelineDynamicStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
      .dynamicStateCount = 2,
      .pDynamicStates = g->dynamic_states};
  g->info = (VkGraphicsPipelineCreateInfo){
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
      .stageCount = 2,
      .pStages = g->stages,
      .pVertexInputState = &g->vertex_input,
      .pInputAssemblyState = &g->input_assembly,
      .pViewportState = &g->viewport,
      .pRasterizationState = &g->raster,
      .pMultisampleState = &g->multisample,
      .pColorBlendState = &g->blend,
      .pDynamicState = &g->dynamic,
      .layout = o->layout,
      .renderPass = o->render_pass,
      .subpass = 0,
      .basePipelineIndex = -1};
}

void test_compute_info(test_compute *c, const test_objects *o, uint32_t variant) {
  memset(c, 0, sizeof *c);
  c->spec_value = variant;
  c->spec_entry = (VkSpecializationMapEntry){.constantID = 0, .offset = 0, .size = 4};
  c->spec = (VkSpecializationInfo){.mapEntryCount = 1,
                                   .pMapEntries = &c->spec_entry,
                                   .dataSize = 4,
                                   .pData = &c->spec_value};
  c->info = (VkComputePipelineCreateInfo){
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = o->comp,
                .pName = "main",
                .pSpecializationInfo = &c->spec},
      .layout = o->layout,
      .basePipelineIndex = -1};
}

void test_gpl_info(test_gpl *t, const test_objects *o, uint32_t variant) {
  static const VkGraphicsPipelineLibraryFlagsEXT parts[TEST_GPL_PARTS] = {
      VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT,
      VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT,
      VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT,
      VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT};
  memset(t, 0, sizeof *t);
  test_graphics_info(&t->g, o, variant);
  for (int i = 0; i < TEST_GPL_PARTS; i++) {
    t->parts[i] = (VkGraphicsPipelineLibraryCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT, .flags = parts[i]};
    /* The whole pipeline's state, of which each library reads its part's. */
    t->library[i] = t->g.info;
    t->library[i].pNext = &t->parts[i];
    t->library[i].flags = VK_PIPELINE_CREATE_LIBRARY_BIT_KHR |
                          VK_PIPELINE_CREATE_RETAIN_LINK_TIME_OPTIMIZATION_INFO_BIT_EXT;
    t->library[i].stageCount = 0;
  }
  t->library[1].stageCount = 1; /* the vertex shader */
  t->library[2].stageCount = 1; /* the fragment shader */
  t->library[2].pStages = &t->g.stages[1];
}

void test_gpl_link(test_gpl *t, const VkPipeline libraries[TEST_GPL_PARTS],
                   VkPipelineCreateFlags flags) {
  memcpy(t->libraries, libraries, sizeof t->libraries);
  t->link =
      (VkPipelineLibraryCreateInfoKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR,
                                       .libraryCount = TEST_GPL_PARTS,
                                       .pLibraries = t->libraries};
  t->linked =
      (VkGraphicsPipelineCreateInfo){.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                     .pNext = &t->link,
                                     .flags = flags,
                                     .layout = t->g.info.layout,
                                     .basePipelineIndex = -1};
}

void test_plain_program_pipeline(test_vk *vk, uint32_t variant) {
  test_objects o;
  test_graphics g;
  VkPipeline p;
  test_vk_init(vk);
  test_objects_create_plain(&o, vk->device);
  test_graphics_info(&g, &o, variant);
  if (vkCreateGraphicsPipelines(vk->device, VK_NULL_HANDLE, 1, &g.info, NULL, &p) != VK_SUCCESS)
    _exit(3);
}
