/* The description tests' fixed pipelines (fixtures.h says what they are
 * for): the world of described objects, then one case per fixture. Mostly
 * data, a screen of struct fields per fixture, which is why the file runs
 * past the ~600 lines the project aims for; the library fixtures are in
 * fixtures_gpl.c. */
#include "fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#include "spirv/spv_comp.h"
#include "spirv/spv_frag.h"
#include "spirv/spv_tesc.h"
#include "spirv/spv_tese.h"
#include "spirv/spv_vert.h"

static const struct {
  const uint32_t *code;
  size_t size;
} fx_shaders[] = {
    {spv_vert, sizeof(spv_vert)}, {spv_frag, sizeof(spv_frag)}, {spv_tesc, sizeof(spv_tesc)},
    {spv_tese, sizeof(spv_tese)}, {spv_comp, sizeof(spv_comp)},
};

int fx_code(void *ctx, const pcache__hash *hash, const uint32_t **ret_code, size_t *ret_size) {
  (void)ctx;
  for (size_t i = 0; i < sizeof(fx_shaders) / sizeof(fx_shaders[0]); i++) {
    pcache__hash h;
    pcache__hash128(fx_shaders[i].code, fx_shaders[i].size, &h);
    if (pcache__hash_equal(&h, hash)) {
      *ret_code = fx_shaders[i].code;
      *ret_size = fx_shaders[i].size;
      return 0;
    }
  }
  return PCACHE_EMISSING_MODULE;
}

static const pcache__desc_object *find(void *ctx, int kind, uint64_t handle) {
  fx_world *w = ctx;
  for (int i = 0; i < w->n_objects; i++)
    if (w->objects[i].handle == handle && w->objects[i].kind == kind)
      return w->objects[i].object;
  return NULL;
}

static const pcache__desc_object *lk_module(void *ctx, VkShaderModule h) {
  return find(ctx, FX_MODULE, (uint64_t)h);
}
static const pcache__desc_object *lk_set_layout(void *ctx, VkDescriptorSetLayout h) {
  return find(ctx, FX_SET_LAYOUT, (uint64_t)h);
}
static const pcache__desc_object *lk_pipeline_layout(void *ctx, VkPipelineLayout h) {
  return find(ctx, FX_PIPELINE_LAYOUT, (uint64_t)h);
}
static const pcache__desc_object *lk_render_pass(void *ctx, VkRenderPass h) {
  return find(ctx, FX_RENDER_PASS, (uint64_t)h);
}
static const pcache__desc_object *lk_sampler(void *ctx, VkSampler h) {
  return find(ctx, FX_SAMPLER, (uint64_t)h);
}
static const pcache__desc_object *lk_library(void *ctx, VkPipeline h) {
  return find(ctx, FX_LIBRARY, (uint64_t)h);
}

uint64_t fx_world_add(fx_world *w, int kind, pcache__desc_object *object) {
  uint64_t h = w->next_handle;
  ASSERT_LT(w->n_objects, FX_MAX_OBJECTS);
  w->next_handle += w->handle_step;
  w->objects[w->n_objects].handle = h;
  w->objects[w->n_objects].kind = kind;
  w->objects[w->n_objects].object = object;
  w->n_objects++;
  return h;
}

void fx_module_code(const fx_world *w, VkShaderModule m, const uint32_t **ret_code,
                    size_t *ret_size) {
  VkShaderModule all[] = {w->vs, w->fs, w->tcs, w->tes, w->cs};
  for (int i = 0; i < 5; i++)
    if (all[i] == m) {
      *ret_code = fx_shaders[i].code;
      *ret_size = fx_shaders[i].size;
      return;
    }
  TEST_FAIL_("unknown module");
}

static VkShaderModule add_module(fx_world *w, int i) {
  VkShaderModuleCreateInfo info = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = fx_shaders[i].size,
                                   .pCode = fx_shaders[i].code};
  pcache__desc_object *o;
  ASSERT_OK(pcache__desc_shader_module(&info, &o));
  return (VkShaderModule)fx_world_add(w, FX_MODULE, o);
}

static VkRenderPass add_rp(fx_world *w, const VkRenderPassCreateInfo *info) {
  pcache__desc_object *o;
  ASSERT_OK(pcache__desc_render_pass(info, &o));
  return (VkRenderPass)fx_world_add(w, FX_RENDER_PASS, o);
}

void fx_world_init(fx_world *w, uint64_t handle_base, uint64_t step) {
  pcache__desc_object *o;
  memset(w, 0, sizeof(*w));
  w->next_handle = handle_base;
  w->handle_step = step;
  w->lookup = (pcache__desc_lookup){
      w, lk_module, lk_set_layout, lk_pipeline_layout, lk_render_pass, lk_sampler, lk_library};
  w->vs = add_module(w, 0);
  w->fs = add_module(w, 1);
  w->tcs = add_module(w, 2);
  w->tes = add_module(w, 3);
  w->cs = add_module(w, 4);

  VkSamplerCreateInfo si = {
      .sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
      .magFilter = VK_FILTER_LINEAR,
      .minFilter = VK_FILTER_LINEAR,
      .mipmapMode = VK_SAMPLER_MIPMAP_MODE_LINEAR,
      .addressModeU = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .addressModeV = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_EDGE,
      .addressModeW = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .maxLod = 4.0f,
      .borderColor = VK_BORDER_COLOR_FLOAT_OPAQUE_BLACK,
  };
  ASSERT_OK(pcache__desc_sampler(&si, &o));
  w->sampler = (VkSampler)fx_world_add(w, FX_SAMPLER, o);

  /* Bindings out of order on purpose: the encoder sorts them. */
  VkDescriptorSetLayoutBinding b0[] = {
      {1, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, VK_SHADER_STAGE_FRAGMENT_BIT, &w->sampler},
      {0, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1,
       VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, NULL},
  };
  VkDescriptorSetLayoutCreateInfo sl0 = {.sType =
                                             VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                         .bindingCount = 2,
                                         .pBindings = b0};
  ASSERT_OK(pcache__desc_set_layout(&sl0, &w->lookup, &o));
  w->set0 = (VkDescriptorSetLayout)fx_world_add(w, FX_SET_LAYOUT, o);

  VkDescriptorBindingFlags bf[] = {VK_DESCRIPTOR_BINDING_PARTIALLY_BOUND_BIT};
  VkDescriptorSetLayoutBindingFlagsCreateInfo bfi = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO,
      .bindingCount = 1,
      .pBindingFlags = bf};
  VkDescriptorSetLayoutBinding b1[] = {
      {0, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 4, VK_SHADER_STAGE_ALL_GRAPHICS, NULL}};
  VkDescriptorSetLayoutCreateInfo sl1 = {.sType =
                                             VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                         .pNext = &bfi,
                                         .bindingCount = 1,
                                         .pBindings = b1};
  ASSERT_OK(pcache__desc_set_layout(&sl1, &w->lookup, &o));
  w->set1 = (VkDescriptorSetLayout)fx_world_add(w, FX_SET_LAYOUT, o);

  VkPushConstantRange pc = {VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT |
                                VK_SHADER_STAGE_COMPUTE_BIT,
                            0, 16};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pSetLayouts = &w->set0,
                                   .pushConstantRangeCount = 1,
                                   .pPushConstantRanges = &pc};
  ASSERT_OK(pcache__desc_pipeline_layout(&pl, &w->lookup, &o));
  w->layout = (VkPipelineLayout)fx_world_add(w, FX_PIPELINE_LAYOUT, o);
  VkDescriptorSetLayout both[] = {w->set0, w->set1};
  pl.setLayoutCount = 2;
  pl.pSetLayouts = both;
  ASSERT_OK(pcache__desc_pipeline_layout(&pl, &w->lookup, &o));
  w->layout_full = (VkPipelineLayout)fx_world_add(w, FX_PIPELINE_LAYOUT, o);

  VkAttachmentDescription atts[] = {
      {0, VK_FORMAT_B8G8R8A8_UNORM, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_STORE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_PRESENT_SRC_KHR},
      {0, VK_FORMAT_D32_SFLOAT_S8_UINT, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL},
      {0, VK_FORMAT_R16G16B16A16_SFLOAT, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL},
  };
  VkAttachmentReference color = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference depth = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkSubpassDescription sp = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                             .colorAttachmentCount = 1,
                             .pColorAttachments = &color};
  VkRenderPassCreateInfo rp = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                               .attachmentCount = 1,
                               .pAttachments = atts,
                               .subpassCount = 1,
                               .pSubpasses = &sp};
  w->rp_color = add_rp(w, &rp);
  sp.pDepthStencilAttachment = &depth;
  rp.attachmentCount = 2;
  w->rp_depth = add_rp(w, &rp);

  /* Two subpasses: the first writes attachment 2, the second reads it as
   * an input attachment and writes attachment 0; two views each. */
  VkAttachmentReference gbuf = {2, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference gbuf_in = {2, VK_IMAGE_LAYOUT_SHADER_READ_ONLY_OPTIMAL};
  VkSubpassDescription sps[2] = {
      {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
       .colorAttachmentCount = 1,
       .pColorAttachments = &gbuf},
      {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
       .inputAttachmentCount = 1,
       .pInputAttachments = &gbuf_in,
       .colorAttachmentCount = 1,
       .pColorAttachments = &color},
  };
  VkSubpassDependency dep = {0,
                             1,
                             VK_PIPELINE_STAGE_COLOR_ATTACHMENT_OUTPUT_BIT,
                             VK_PIPELINE_STAGE_FRAGMENT_SHADER_BIT,
                             VK_ACCESS_COLOR_ATTACHMENT_WRITE_BIT,
                             VK_ACCESS_INPUT_ATTACHMENT_READ_BIT,
                             VK_DEPENDENCY_BY_REGION_BIT | VK_DEPENDENCY_VIEW_LOCAL_BIT};
  uint32_t view_masks[] = {3, 3}, correlation = 3;
  int32_t offsets[] = {0};
  VkRenderPassMultiviewCreateInfo mv = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO,
                                        .subpassCount = 2,
                                        .pViewMasks = view_masks,
                                        .dependencyCount = 1,
                                        .pViewOffsets = offsets,
                                        .correlationMaskCount = 1,
                                        .pCorrelationMasks = &correlation};
  VkInputAttachmentAspectReference ar = {1, 0, VK_IMAGE_ASPECT_COLOR_BIT};
  VkRenderPassInputAttachmentAspectCreateInfo ari = {
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_INPUT_ATTACHMENT_ASPECT_CREATE_INFO,
      .pNext = &mv,
      .aspectReferenceCount = 1,
      .pAspectReferences = &ar};
  VkAttachmentDescription mv_atts[3] = {atts[0], atts[1], atts[2]};
  mv_atts[0].finalLayout = VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL;
  VkRenderPassCreateInfo rpm = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                                .pNext = &ari,
                                .attachmentCount = 3,
                                .pAttachments = mv_atts,
                                .subpassCount = 2,
                                .pSubpasses = sps,
                                .dependencyCount = 1,
                                .pDependencies = &dep};
  w->rp_multiview = add_rp(w, &rpm);

  /* rp_color again through render pass 2: must describe alike. */
  VkAttachmentDescription2 a2 = {.sType = VK_STRUCTURE_TYPE_ATTACHMENT_DESCRIPTION_2,
                                 .format = VK_FORMAT_B8G8R8A8_UNORM,
                                 .samples = VK_SAMPLE_COUNT_1_BIT,
                                 .loadOp = VK_ATTACHMENT_LOAD_OP_LOAD,
                                 .finalLayout = VK_IMAGE_LAYOUT_GENERAL};
  VkAttachmentReference2 c2 = {.sType = VK_STRUCTURE_TYPE_ATTACHMENT_REFERENCE_2,
                               .attachment = 0,
                               .layout = VK_IMAGE_LAYOUT_GENERAL,
                               .aspectMask = VK_IMAGE_ASPECT_COLOR_BIT};
  VkSubpassDescription2 s2 = {.sType = VK_STRUCTURE_TYPE_SUBPASS_DESCRIPTION_2,
                              .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                              .colorAttachmentCount = 1,
                              .pColorAttachments = &c2};
  VkRenderPassCreateInfo2 rp2 = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO_2,
                                 .attachmentCount = 1,
                                 .pAttachments = &a2,
                                 .subpassCount = 1,
                                 .pSubpasses = &s2};
  ASSERT_OK(pcache__desc_render_pass2(&rp2, &o));
  w->rp2_color = (VkRenderPass)fx_world_add(w, FX_RENDER_PASS, o);
  fx_world_add_libraries(w);
}

void fx_world_free(fx_world *w) {
  for (int i = 0; i < w->n_objects; i++)
    pcache__desc_object_free(w->objects[i].object);
  w->n_objects = 0;
}

/* A hand-aligned table. */
/* clang-format off */
const char *const fx_names[FX_COUNT] = {
    "gfx_basic",              "gfx_depth_stencil",  "gfx_dynamic_rendering",
    "gfx_dynamic_state",      "gfx_blend",          "gfx_msaa",
    "gfx_full",               "gfx_discard",        "gfx_multiview",
    "gfx_rp2",                "compute_basic",      "compute_spec",
    "gfx_depth_clip_control", "gpl_vertex_input",   "gpl_pre_raster",
    "gpl_fragment",           "gpl_output",         "gpl_shaders",
    "gpl_fragment_rendering", "gpl_nested_library", "gpl_linked",
    "gpl_linked_lto",         "gpl_linked_nested",
};
/* clang-format on */

int fx_replayable(int i) {
  /* gfx_full and gfx_depth_clip_control chain extension state lavapipe
   * need not have enabled; compute_spec asks for a subgroup size. */
  return i != 6 && i != 11 && i != 12;
}

static void fill_base(fx_pipeline *p, const fx_world *w) {
  float k = 1.0f;
  p->stages[0] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_VERTEX_BIT,
      .module = w->vs,
      .pName = "main"};
  p->stages[1] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
      .module = w->fs,
      .pName = "main",
      .pSpecializationInfo = &p->spec};
  /* Data words 1 and 3 are referenced by nobody: junk that must not count. */
  memcpy(&p->spec_data[0], &k, 4);
  p->spec_data[1] = 0xdeadbeef;
  p->spec_data[2] = 0;
  p->spec_data[3] = 0xfeedface;
  p->spec_entries[0] = (VkSpecializationMapEntry){0, 0, 4};
  p->spec_entries[1] = (VkSpecializationMapEntry){1, 8, 4};
  p->spec = (VkSpecializationInfo){2, p->spec_entries, sizeof(p->spec_data), p->spec_data};
  p->vb[0] = (VkVertexInputBindingDescription){0, 20, VK_VERTEX_INPUT_RATE_VERTEX};
  p->va[0] = (VkVertexInputAttributeDescription){0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0};
  p->va[1] = (VkVertexInputAttributeDescription){1, 0, VK_FORMAT_R32G32_SFLOAT, 12};
  p->vi = (VkPipelineVertexInputStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
      .vertexBindingDescriptionCount = 1,
      .pVertexBindingDescriptions = p->vb,
      .vertexAttributeDescriptionCount = 2,
      .pVertexAttributeDescriptions = p->va};
  p->ia = (VkPipelineInputAssemblyStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology = VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
  p->ts = (VkPipelineTessellationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_STATE_CREATE_INFO,
      .patchControlPoints = 3};
  p->viewports[0] = (VkViewport){0, 0, 64, 64, 0, 1};
  p->scissors[0] = (VkRect2D){{0, 0}, {64, 64}};
  p->vp = (VkPipelineViewportStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .pViewports = p->viewports,
      .scissorCount = 1,
      .pScissors = p->scissors};
  p->rs = (VkPipelineRasterizationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .polygonMode = VK_POLYGON_MODE_FILL,
      .cullMode = VK_CULL_MODE_BACK_BIT,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1.0f};
  p->ms = (VkPipelineMultisampleStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
  p->ds = (VkPipelineDepthStencilStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
      .depthCompareOp = VK_COMPARE_OP_LESS,
      .maxDepthBounds = 1.0f};
  for (int i = 0; i < 2; i++)
    p->cba[i] = (VkPipelineColorBlendAttachmentState){
        .colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT |
                          VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT};
  p->cb = (VkPipelineColorBlendStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .logicOp = VK_LOGIC_OP_COPY,
      .attachmentCount = 1,
      .pAttachments = p->cba};
  p->dy = (VkPipelineDynamicStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO, .pDynamicStates = p->dyn};
  p->color_formats[0] = VK_FORMAT_B8G8R8A8_UNORM;
  p->color_formats[1] = VK_FORMAT_R16G16B16A16_SFLOAT;
  p->rendering = (VkPipelineRenderingCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO,
      .colorAttachmentCount = 1,
      .pColorAttachmentFormats = p->color_formats};
  p->feedback = (VkPipelineCreationFeedbackCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
      .pPipelineCreationFeedback = &p->feedback_pipeline,
      .pipelineStageCreationFeedbackCount = 2,
      .pPipelineStageCreationFeedbacks = p->feedback_stages};
  p->info = (VkGraphicsPipelineCreateInfo){
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
      .layout = w->layout,
      .renderPass = w->rp_color,
      .basePipelineIndex = -1};
}

static void fill_compute(fx_pipeline *p, const fx_world *w) {
  p->compute = 1;
  p->spec_data[0] = 32;
  p->spec_data[1] = 3;
  p->spec_entries[0] = (VkSpecializationMapEntry){0, 0, 4};
  p->spec = (VkSpecializationInfo){1, p->spec_entries, 4, p->spec_data};
  p->cinfo = (VkComputePipelineCreateInfo){
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = w->cs,
                .pName = "main",
                .pSpecializationInfo = &p->spec},
      .layout = w->layout,
      .basePipelineIndex = -1};
}

static void add_dyn(fx_pipeline *p, VkDynamicState s) {
  p->dyn[p->dy.dynamicStateCount++] = s;
  p->info.pDynamicState = &p->dy;
}

static void fill(fx_pipeline *p, const fx_world *w, int i) {
  if (i == 10 || i == 11) {
    fill_compute(p, w);
    if (i == 11) {
      p->spec_entries[1] = (VkSpecializationMapEntry){1, 4, 4};
      p->spec.mapEntryCount = 2;
      p->spec.dataSize = 8;
      p->subgroup = (VkPipelineShaderStageRequiredSubgroupSizeCreateInfo){
          .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
          .requiredSubgroupSize = 8};
      p->cinfo.stage.pNext = &p->subgroup;
      p->cinfo.flags = VK_PIPELINE_CREATE_DISABLE_OPTIMIZATION_BIT;
    }
    return;
  }
  fill_base(p, w);
  if (i >= FX_GPL_FIRST) {
    fx_fill_gpl(p, w, i);
    return;
  }
  switch (i) {
  case 1: /* gfx_depth_stencil */
    p->info.renderPass = w->rp_depth;
    p->ds.depthTestEnable = VK_TRUE;
    p->ds.depthWriteEnable = VK_TRUE;
    p->ds.stencilTestEnable = VK_TRUE;
    p->ds.front = (VkStencilOpState){VK_STENCIL_OP_KEEP, VK_STENCIL_OP_REPLACE, VK_STENCIL_OP_KEEP,
                                     VK_COMPARE_OP_ALWAYS, 0xff, 0xff, 1};
    p->ds.back = p->ds.front;
    add_dyn(p, VK_DYNAMIC_STATE_STENCIL_REFERENCE);
    break;
  case 2: /* gfx_dynamic_rendering */
    p->info.renderPass = VK_NULL_HANDLE;
    p->info.pNext = &p->rendering;
    p->rendering.depthAttachmentFormat = VK_FORMAT_D32_SFLOAT;
    p->ds.depthTestEnable = VK_TRUE;
    p->ds.depthWriteEnable = VK_TRUE;
    break;
  case 3: /* gfx_dynamic_state */
    add_dyn(p, VK_DYNAMIC_STATE_VIEWPORT);
    add_dyn(p, VK_DYNAMIC_STATE_SCISSOR);
    add_dyn(p, VK_DYNAMIC_STATE_LINE_WIDTH);
    add_dyn(p, VK_DYNAMIC_STATE_CULL_MODE);
    add_dyn(p, VK_DYNAMIC_STATE_FRONT_FACE);
    add_dyn(p, VK_DYNAMIC_STATE_PRIMITIVE_TOPOLOGY);
    add_dyn(p, VK_DYNAMIC_STATE_BLEND_CONSTANTS);
    break;
  case 4: /* gfx_blend */
    p->cba[0].blendEnable = VK_TRUE;
    p->cba[0].srcColorBlendFactor = VK_BLEND_FACTOR_CONSTANT_COLOR;
    p->cba[0].dstColorBlendFactor = VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA;
    p->cba[0].colorBlendOp = VK_BLEND_OP_ADD;
    p->cba[0].srcAlphaBlendFactor = VK_BLEND_FACTOR_ONE;
    p->cba[0].dstAlphaBlendFactor = VK_BLEND_FACTOR_ZERO;
    p->cba[0].alphaBlendOp = VK_BLEND_OP_MAX;
    p->cb.blendConstants[0] = 0.5f;
    p->cb.blendConstants[3] = 1.0f;
    break;
  case 5: /* gfx_msaa */
    p->info.renderPass = VK_NULL_HANDLE;
    p->info.pNext = &p->rendering;
    p->ms.rasterizationSamples = VK_SAMPLE_COUNT_4_BIT;
    p->ms.sampleShadingEnable = VK_TRUE;
    p->ms.minSampleShading = 0.5f;
    p->sample_mask[0] = 0x5;
    p->ms.pSampleMask = p->sample_mask;
    p->ms.alphaToCoverageEnable = VK_TRUE;
    break;
  case 6: /* gfx_full: every field the encoder knows, nothing dynamic */
    p->info.flags = VK_PIPELINE_CREATE_DISABLE_OPTIMIZATION_BIT;
    p->info.pNext = &p->rendering;
    p->rendering.pNext = &p->feedback;
    p->info.renderPass = VK_NULL_HANDLE;
    p->info.layout = w->layout_full;
    p->rendering.viewMask = 0;
    p->rendering.colorAttachmentCount = 2;
    p->rendering.depthAttachmentFormat = VK_FORMAT_D32_SFLOAT_S8_UINT;
    p->rendering.stencilAttachmentFormat = VK_FORMAT_D32_SFLOAT_S8_UINT;
    p->stages[3] = p->stages[1]; /* fragment last in the array, sorted anyway */
    p->stages[1] = (VkPipelineShaderStageCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
        .stage = VK_SHADER_STAGE_TESSELLATION_EVALUATION_BIT,
        .module = w->tes,
        .pName = "main"};
    p->stages[2] = (VkPipelineShaderStageCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
        .stage = VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT,
        .flags = VK_PIPELINE_SHADER_STAGE_CREATE_ALLOW_VARYING_SUBGROUP_SIZE_BIT,
        .module = w->tcs,
        .pName = "main"};
    p->info.stageCount = 4;
    p->info.pTessellationState = &p->ts;
    p->ts_origin = (VkPipelineTessellationDomainOriginStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_DOMAIN_ORIGIN_STATE_CREATE_INFO,
        .domainOrigin = VK_TESSELLATION_DOMAIN_ORIGIN_LOWER_LEFT};
    p->ts.pNext = &p->ts_origin;
    p->ia.topology = VK_PRIMITIVE_TOPOLOGY_PATCH_LIST;
    p->ia.primitiveRestartEnable = VK_TRUE;
    p->vb[1] = (VkVertexInputBindingDescription){1, 8, VK_VERTEX_INPUT_RATE_INSTANCE};
    p->vi.vertexBindingDescriptionCount = 2;
    p->va[1].binding = 1;
    p->va[1].offset = 0;
    p->divs[0] = (VkVertexInputBindingDivisorDescriptionEXT){1, 3};
    p->div = (VkPipelineVertexInputDivisorStateCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_DIVISOR_STATE_CREATE_INFO_EXT,
        .vertexBindingDivisorCount = 1,
        .pVertexBindingDivisors = p->divs};
    p->vi.pNext = &p->div;
    p->viewports[0] = (VkViewport){1, 2, 30, 40, 0.25f, 0.75f};
    p->scissors[0] = (VkRect2D){{-3, 4}, {50, 60}};
    p->rs.depthClampEnable = VK_FALSE;
    p->rs.polygonMode = VK_POLYGON_MODE_LINE;
    p->rs.depthBiasEnable = VK_TRUE;
    p->rs.depthBiasConstantFactor = 1.5f;
    p->rs.depthBiasClamp = 0.125f;
    p->rs.depthBiasSlopeFactor = 2.0f;
    p->rs.lineWidth = 2.0f;
    p->rs_cons = (VkPipelineRasterizationConservativeStateCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_CONSERVATIVE_STATE_CREATE_INFO_EXT,
        .conservativeRasterizationMode = VK_CONSERVATIVE_RASTERIZATION_MODE_OVERESTIMATE_EXT,
        .extraPrimitiveOverestimationSize = 0.25f};
    p->rs_stream = (VkPipelineRasterizationStateStreamCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_STREAM_CREATE_INFO_EXT,
        .pNext = &p->rs_cons,
        .rasterizationStream = 1};
    p->rs_line = (VkPipelineRasterizationLineStateCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_LINE_STATE_CREATE_INFO_EXT,
        .pNext = &p->rs_stream,
        .lineRasterizationMode = VK_LINE_RASTERIZATION_MODE_BRESENHAM_EXT,
        .stippledLineEnable = VK_TRUE,
        .lineStippleFactor = 2,
        .lineStipplePattern = 0xf0f0};
    p->rs_clip = (VkPipelineRasterizationDepthClipStateCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT,
        .pNext = &p->rs_line,
        .depthClipEnable = VK_FALSE};
    p->rs_provoking = (VkPipelineRasterizationProvokingVertexStateCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_PROVOKING_VERTEX_STATE_CREATE_INFO_EXT,
        .pNext = &p->rs_clip,
        .provokingVertexMode = VK_PROVOKING_VERTEX_MODE_LAST_VERTEX_EXT};
    p->rs.pNext = &p->rs_provoking;
    p->ms.rasterizationSamples = VK_SAMPLE_COUNT_4_BIT;
    p->ms.sampleShadingEnable = VK_TRUE;
    p->ms.minSampleShading = 0.5f;
    p->sample_mask[0] = 0x7;
    p->ms.pSampleMask = p->sample_mask;
    p->ms.alphaToCoverageEnable = VK_TRUE;
    p->ms.alphaToOneEnable = VK_TRUE;
    p->ds.depthTestEnable = VK_TRUE;
    p->ds.depthWriteEnable = VK_TRUE;
    p->ds.depthBoundsTestEnable = VK_TRUE;
    p->ds.minDepthBounds = 0.125f;
    p->ds.maxDepthBounds = 0.875f;
    p->ds.stencilTestEnable = VK_TRUE;
    p->ds.front = (VkStencilOpState){VK_STENCIL_OP_INCREMENT_AND_CLAMP, VK_STENCIL_OP_REPLACE,
                                     VK_STENCIL_OP_INVERT, VK_COMPARE_OP_EQUAL, 0x0f, 0xf0, 7};
    p->ds.back = (VkStencilOpState){VK_STENCIL_OP_ZERO, VK_STENCIL_OP_DECREMENT_AND_WRAP,
                                    VK_STENCIL_OP_INCREMENT_AND_WRAP, VK_COMPARE_OP_GREATER,
                                    0x3f, 0x7f, 9};
    p->cb.logicOpEnable = VK_TRUE;
    p->cb.logicOp = VK_LOGIC_OP_XOR;
    p->cb.attachmentCount = 2;
    p->cba[1] = (VkPipelineColorBlendAttachmentState){
        VK_TRUE,
        VK_BLEND_FACTOR_SRC_ALPHA,
        VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA,
        VK_BLEND_OP_ADD,
        VK_BLEND_FACTOR_ONE,
        VK_BLEND_FACTOR_ZERO,
        VK_BLEND_OP_SUBTRACT,
        VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_A_BIT};
    p->cb.blendConstants[0] = 0.25f;
    p->cb.blendConstants[1] = 0.5f;
    p->cb.blendConstants[2] = 0.75f;
    p->cb.blendConstants[3] = 1.0f;
    p->cw_enables[0] = VK_TRUE;
    p->cw_enables[1] = VK_FALSE;
    p->cw = (VkPipelineColorWriteCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_WRITE_CREATE_INFO_EXT,
        .attachmentCount = 2,
        .pColorWriteEnables = p->cw_enables};
    p->cb.pNext = &p->cw;
    break;
  case 7: /* gfx_discard: the fragment state is there but ignored */
    p->rs.rasterizerDiscardEnable = VK_TRUE;
    p->info.stageCount = 1;
    break;
  case 8: /* gfx_multiview */
    p->info.renderPass = w->rp_multiview;
    p->info.subpass = 1;
    break;
  case 9: /* gfx_rp2 */
    p->info.renderPass = w->rp2_color;
    break;
  case 12: /* gfx_depth_clip_control: OpenGL's depth range, as Zink asks */
    p->vp_clip = (VkPipelineViewportDepthClipControlCreateInfoEXT){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_DEPTH_CLIP_CONTROL_CREATE_INFO_EXT,
        .negativeOneToOne = VK_TRUE};
    p->vp.pNext = &p->vp_clip;
    break;
  }
}

fx_pipeline *fx_make(const fx_world *w, int i, size_t pad) {
  uint8_t *block = calloc(1, sizeof(fx_pipeline) + pad + 16);
  fx_pipeline *p;
  ASSERT_TRUE(block);
  /* Keep the struct aligned whatever the pad. */
  p = (fx_pipeline *)(block + ((pad + 15) & ~(size_t)15));
  p->block = block;
  fill(p, w, i);
  return p;
}

void fx_free(fx_pipeline *p) {
  if (p)
    free(p->block);
}

int fx_describe(const fx_pipeline *p, const fx_world *w, pcache__desc_buf *buf,
                pcache__desc_keys *ret_keys) {
  if (p->compute)
    return pcache__desc_compute(&p->cinfo, &w->lookup, buf, ret_keys);
  return pcache__desc_graphics(&p->info, &w->lookup, buf, ret_keys);
}

void fx_keys_text(const fx_world *w, int i, size_t pad, char *out, size_t out_size,
                  pcache__desc_buf *buf) {
  fx_pipeline *p = fx_make(w, i, pad);
  pcache__desc_keys keys;
  char hex[33];
  pcache__desc_buf_init(buf);
  ASSERT_OK(fx_describe(p, w, buf, &keys));
  pcache__hash_format(&keys.state_hash, hex);
  snprintf(out, out_size, "%s %016llx", hex, (unsigned long long)keys.tier1_key);
  fx_free(p);
}
