/* Every hashed field changes the hash when it changes; every ignored one
 * does not; an unknown pNext anywhere makes the pipeline unhashable.
 * Table-driven over fx_pipeline (offsetof), starting from the fixture that
 * sets every field the encoder knows (gfx_full) and from fixtures where a
 * rule hides state (dynamic state, discard, no depth attachment...). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"
#include "fixtures.h"
#include "test.h"

/* gfx_full: every field below is state. */
static const field full_hashed[] = {
    FB(info.flags, VK_PIPELINE_CREATE_VIEW_INDEX_FROM_DEVICE_INDEX_BIT),
    /* Not what is compiled, but what the app may do: only a pipeline made
     * with it may be a base (issue 15, docs/pipeline-desc.md). */
    FB(info.flags, VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT),
    F(info.flags, U32),
    F(info.stageCount, DEC),
    F(stages[0].flags, U32),
    F(stages[0].stage, U32),
    F(stages[1].stage, U32),
    F(stages[2].flags, U32),
    F(stages[3].stage, U32),
    F(spec_entries[0].constantID, U32),
    F(spec_entries[1].constantID, U32),
    F(spec_entries[0].offset, U32),
    F(spec_entries[1].size, U32),
    F(spec_data[0], U32),
    F(spec_data[2], U32),
    F(spec.mapEntryCount, DEC),
    F(vi.vertexBindingDescriptionCount, DEC),
    F(vi.vertexAttributeDescriptionCount, DEC),
    F(vb[0].binding, U32),
    F(vb[0].stride, U32),
    F(vb[0].inputRate, U32),
    F(vb[1].binding, U32),
    F(vb[1].stride, U32),
    F(va[0].location, U32),
    F(va[0].binding, U32),
    F(va[0].format, U32),
    F(va[0].offset, U32),
    F(va[1].location, U32),
    F(va[1].offset, U32),
    F(divs[0].divisor, U32),
    F(divs[0].binding, U32),
    F(ia.topology, U32),
    F(ia.primitiveRestartEnable, B32),
    F(ts.patchControlPoints, U32),
    F(ts_origin.domainOrigin, U32),
    F(vp.viewportCount, DEC),
    F(vp.scissorCount, DEC),
    F(viewports[0].x, F32),
    F(viewports[0].y, F32),
    F(viewports[0].width, F32),
    F(viewports[0].height, F32),
    F(viewports[0].minDepth, F32),
    F(viewports[0].maxDepth, F32),
    F(scissors[0].offset.x, I32),
    F(scissors[0].offset.y, I32),
    F(scissors[0].extent.width, U32),
    F(scissors[0].extent.height, U32),
    F(rs.depthClampEnable, B32),
    F(rs.rasterizerDiscardEnable, B32),
    F(rs.polygonMode, U32),
    F(rs.cullMode, U32),
    F(rs.frontFace, U32),
    F(rs.depthBiasEnable, B32),
    F(rs.depthBiasConstantFactor, F32),
    F(rs.depthBiasClamp, F32),
    F(rs.depthBiasSlopeFactor, F32),
    F(rs.lineWidth, F32),
    F(rs_cons.conservativeRasterizationMode, U32),
    F(rs_cons.extraPrimitiveOverestimationSize, F32),
    F(rs_stream.rasterizationStream, U32),
    F(rs_line.lineRasterizationMode, U32),
    F(rs_line.stippledLineEnable, B32),
    F(rs_line.lineStippleFactor, U32),
    F(rs_line.lineStipplePattern, U16),
    F(rs_clip.depthClipEnable, B32),
    F(rs_provoking.provokingVertexMode, U32),
    F(ms.rasterizationSamples, U32),
    F(ms.sampleShadingEnable, B32),
    F(ms.minSampleShading, F32),
    F(sample_mask[0], U32),
    F(ms.alphaToCoverageEnable, B32),
    F(ms.alphaToOneEnable, B32),
    F(ds.flags, U32),
    F(ds.depthTestEnable, B32),
    F(ds.depthWriteEnable, B32),
    F(ds.depthCompareOp, U32),
    F(ds.depthBoundsTestEnable, B32),
    F(ds.stencilTestEnable, B32),
    F(ds.front.failOp, U32),
    F(ds.front.passOp, U32),
    F(ds.front.depthFailOp, U32),
    F(ds.front.compareOp, U32),
    F(ds.front.compareMask, U32),
    F(ds.front.writeMask, U32),
    F(ds.front.reference, U32),
    F(ds.back.failOp, U32),
    F(ds.back.passOp, U32),
    F(ds.back.depthFailOp, U32),
    F(ds.back.compareOp, U32),
    F(ds.back.compareMask, U32),
    F(ds.back.writeMask, U32),
    F(ds.back.reference, U32),
    F(ds.minDepthBounds, F32),
    F(ds.maxDepthBounds, F32),
    F(cb.flags, U32),
    F(cb.logicOpEnable, B32),
    F(cb.logicOp, U32),
    F(cba[0].blendEnable, B32),
    F(cba[0].colorWriteMask, U32),
    F(cba[1].blendEnable, B32),
    F(cba[1].srcColorBlendFactor, U32),
    F(cba[1].dstColorBlendFactor, U32),
    F(cba[1].colorBlendOp, U32),
    F(cba[1].srcAlphaBlendFactor, U32),
    F(cba[1].dstAlphaBlendFactor, U32),
    F(cba[1].alphaBlendOp, U32),
    F(cba[1].colorWriteMask, U32),
    F(cb.blendConstants[0], F32),
    F(cb.blendConstants[1], F32),
    F(cb.blendConstants[2], F32),
    F(cb.blendConstants[3], F32),
    F(cw_enables[0], B32),
    F(cw_enables[1], B32),
    F(rendering.viewMask, U32),
    F(rendering.colorAttachmentCount, DEC),
    F(color_formats[0], U32),
    F(color_formats[1], U32),
    F(rendering.depthAttachmentFormat, U32),
    F(rendering.stencilAttachmentFormat, U32),
};

/* gfx_full: what does not change the compiled code. */
static const field full_ignored[] = {
    FB(info.flags, VK_PIPELINE_CREATE_DERIVATIVE_BIT),
    FB(info.flags, VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT),
    FB(info.flags, VK_PIPELINE_CREATE_EARLY_RETURN_ON_FAILURE_BIT),
    F(info.basePipelineIndex, I32),
    F(info.basePipelineHandle, U32),
    F(info.subpass, U32), /* no render pass */
    F(spec_data[1], U32), /* bytes no map entry names */
    F(spec_data[3], U32),
    F(spec.dataSize, DEC),
    F(feedback.pipelineStageCreationFeedbackCount, DEC),
    F(feedback_pipeline.flags, U32),
};

/* gfx_basic: state its render pass or stages leave unused. */
static const field basic_ignored[] = {
    F(ds.depthTestEnable, B32), /* no depth attachment */
    F(ds.stencilTestEnable, B32),
    F(ts.patchControlPoints, U32), /* no tessellation stages */
    F(cba[0].srcColorBlendFactor, U32), /* blending off */
    F(cba[0].alphaBlendOp, U32),
    F(cb.logicOp, U32), /* logic op off */
    F(ms.minSampleShading, F32), /* sample shading off */
    F(rendering.viewMask, U32), /* render pass given: rendering info ignored */
    F(rendering.colorAttachmentCount, DEC),
    F(rs.depthBiasConstantFactor, F32), /* depth bias off */
    F(ds.minDepthBounds, F32),
};

static const field dynamic_ignored[] = {
    F(viewports[0].width, F32), F(scissors[0].extent.width, U32), F(rs.lineWidth, F32),
    F(rs.cullMode, U32),        F(rs.frontFace, U32),              F(cb.blendConstants[0], F32),
};
static const field dynamic_hashed[] = {
    F(ia.topology, U32), /* its class still matters */
    F(vp.viewportCount, DEC),
    F(rs.polygonMode, U32),
};

static const field discard_ignored[] = {
    F(ms.rasterizationSamples, U32), F(viewports[0].width, F32), F(cb.attachmentCount, DEC),
    F(cba[0].colorWriteMask, U32),   F(vp.viewportCount, DEC),  F(ms.alphaToOneEnable, B32),
};

static const field stencil_ignored[] = {
    F(ds.front.reference, U32), /* VK_DYNAMIC_STATE_STENCIL_REFERENCE */
    F(ds.back.reference, U32),
};
static const field stencil_hashed[] = {
    F(ds.front.compareMask, U32), F(ds.back.writeMask, U32), F(ds.depthTestEnable, B32),
    F(ds.front.passOp, U32),
};
static const field multiview_hashed[] = {F(info.subpass, DEC)};

static const field compute_hashed[] = {
    {"cinfo.flags", offsetof(fx_pipeline, cinfo.flags), U32, 0},
    FB(cinfo.flags, VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT),
    {"cinfo.stage.flags", offsetof(fx_pipeline, cinfo.stage.flags), U32, 0},
    {"subgroup.requiredSubgroupSize", offsetof(fx_pipeline, subgroup.requiredSubgroupSize), U32, 0},
    F(spec_data[0], U32),
    F(spec_data[1], U32),
    F(spec_entries[1].constantID, U32),
};
static const field compute_ignored[] = {
    {"cinfo.basePipelineIndex", offsetof(fx_pipeline, cinfo.basePipelineIndex), I32, 0},
    FB(cinfo.flags, VK_PIPELINE_CREATE_DERIVATIVE_BIT),
    F(spec_data[2], U32),
};

/* ---------------------------------------------------------------- handles */

static void handles_are_not_hashed(fx_world *w) {
  fx_pipeline *p = fx_make(w, 6, 0);
  pcache__hash h0 = fx_hash_of(p, w), h;
  /* The same content under other handles. */
  for (int i = 0; i < w->n_objects; i++) {
    pcache__desc_object *copy = malloc(sizeof(*copy) + w->objects[i].object->encoded_size);
    uint64_t nh;
    ASSERT_TRUE(copy);
    *copy = *w->objects[i].object;
    copy->encoded = (uint8_t *)(copy + 1);
    memcpy(copy->encoded, w->objects[i].object->encoded, copy->encoded_size);
    nh = fx_world_add(w, w->objects[i].kind, copy);
    if (w->objects[i].handle == (uint64_t)p->info.layout)
      p->info.layout = (VkPipelineLayout)nh;
    for (int s = 0; s < 4; s++)
      if (w->objects[i].handle == (uint64_t)p->stages[s].module)
        p->stages[s].module = (VkShaderModule)nh;
    if (w->objects[i].kind == FX_SAMPLER)
      break; /* modules and sampler come first; enough */
  }
  h = fx_hash_of(p, w);
  ASSERT_TRUE(pcache__hash_equal(&h, &h0));
  fx_free(p);
}

/* ---------------------------------------------------------------- unhashable */

static VkBaseInStructure unknown = {VK_STRUCTURE_TYPE_PIPELINE_ROBUSTNESS_CREATE_INFO_EXT, NULL};

#define UNHASHABLE(fixture, member)                                                                \
  do {                                                                                             \
    fx_pipeline *p_ = fx_make(&w, fixture, 0);                                                     \
    pcache__desc_buf b_;                                                                           \
    pcache__desc_keys k_;                                                                          \
    unknown.pNext = (const VkBaseInStructure *)p_->member;                                         \
    p_->member = (void *)&unknown;                                                                 \
    pcache__desc_buf_init(&b_);                                                                    \
    if (fx_describe(p_, &w, &b_, &k_) != PCACHE_EUNHASHABLE)                                       \
      TEST_FAIL_("%s: unknown struct in %s not refused", fx_names[fixture], #member);              \
    /* The reason names the struct, for the layer's report. */                                     \
    ASSERT_TRUE(b_.unhashable_reason && !strcmp(b_.unhashable_reason, "pnext"));                   \
    ASSERT_TRUE(b_.unhashable_stype == (uint32_t)unknown.sType);                                   \
    pcache__desc_buf_release(&b_);                                                                 \
    fx_free(p_);                                                                                   \
    n_unhashable++;                                                                                \
  } while (0)

static void objects_unhashable(void) {
  pcache__desc_object *o = NULL;
  pcache__desc_lookup none = {0};
  VkSamplerYcbcrConversionInfo ycbcr = {VK_STRUCTURE_TYPE_SAMPLER_YCBCR_CONVERSION_INFO, NULL,
                                        (VkSamplerYcbcrConversion)0x10};
  VkSamplerCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO, .pNext = &ycbcr};
  VkSampler missing = (VkSampler)0x999;
  VkDescriptorSetLayoutBinding b = {0, VK_DESCRIPTOR_TYPE_SAMPLER, 1, VK_SHADER_STAGE_ALL,
                                    &missing};
  VkDescriptorSetLayoutCreateInfo sl = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                        .bindingCount = 1,
                                        .pBindings = &b};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .pNext = &unknown};
  VkRenderPassCreateInfo rp = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                               .pNext = &unknown};
  VkShaderModuleCreateInfo sm = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .pNext = &unknown};
  unknown.pNext = NULL;
  ASSERT_ERR(pcache__desc_sampler(&si, &o), PCACHE_EUNHASHABLE);
  si.pNext = &unknown;
  ASSERT_ERR(pcache__desc_sampler(&si, &o), PCACHE_EUNHASHABLE);
  ASSERT_ERR(pcache__desc_set_layout(&sl, &none, &o), PCACHE_EUNHASHABLE);
  sl.pNext = &unknown;
  b.pImmutableSamplers = NULL;
  ASSERT_ERR(pcache__desc_set_layout(&sl, &none, &o), PCACHE_EUNHASHABLE);
  ASSERT_ERR(pcache__desc_pipeline_layout(&pl, &none, &o), PCACHE_EUNHASHABLE);
  ASSERT_ERR(pcache__desc_render_pass(&rp, &o), PCACHE_EUNHASHABLE);
  ASSERT_ERR(pcache__desc_shader_module(&sm, &o), PCACHE_EUNHASHABLE);
  ASSERT_TRUE(o == NULL);
}

/* ---------------------------------------------------------------- objects */

static pcache__hash sampler_hash(const VkSamplerCreateInfo *si) {
  pcache__desc_object *o;
  pcache__hash h;
  ASSERT_OK(pcache__desc_sampler(si, &o));
  h = o->hash;
  pcache__desc_object_free(o);
  return h;
}

static void sampler_fields(void) {
  VkSamplerReductionModeCreateInfo red = {VK_STRUCTURE_TYPE_SAMPLER_REDUCTION_MODE_CREATE_INFO,
                                          NULL, VK_SAMPLER_REDUCTION_MODE_MIN};
  VkSamplerCustomBorderColorCreateInfoEXT border = {
      VK_STRUCTURE_TYPE_SAMPLER_CUSTOM_BORDER_COLOR_CREATE_INFO_EXT, &red,
      {.float32 = {0.25f, 0.5f, 0.75f, 1}}, VK_FORMAT_R8G8B8A8_UNORM};
  VkSamplerCreateInfo base = {.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
                              .pNext = &border,
                              .flags = 0,
                              .magFilter = VK_FILTER_LINEAR,
                              .addressModeU = VK_SAMPLER_ADDRESS_MODE_CLAMP_TO_BORDER,
                              .mipLodBias = 0.5f,
                              .anisotropyEnable = VK_TRUE,
                              .maxAnisotropy = 4,
                              .compareEnable = VK_TRUE,
                              .compareOp = VK_COMPARE_OP_LESS,
                              .minLod = 1,
                              .maxLod = 8,
                              .borderColor = VK_BORDER_COLOR_FLOAT_CUSTOM_EXT};
  pcache__hash h0 = sampler_hash(&base);
  static const struct {
    const char *name;
    size_t off;
    int type;
  } fields[] = {
#define S(m, t) {#m, offsetof(VkSamplerCreateInfo, m), t}
      S(flags, U32),         S(magFilter, U32),       S(minFilter, U32),
      S(mipmapMode, U32),    S(addressModeU, U32),    S(addressModeV, U32),
      S(addressModeW, U32),  S(mipLodBias, F32),      S(anisotropyEnable, B32),
      S(maxAnisotropy, F32), S(compareEnable, B32),   S(compareOp, U32),
      S(minLod, F32),        S(maxLod, F32),          S(borderColor, U32),
      S(unnormalizedCoordinates, B32),
#undef S
  };
  for (size_t i = 0; i < N(fields); i++) {
    VkSamplerCreateInfo si = base;
    fx_pipeline tmp; /* reuse fx_mutate(): place the value in a scratch pipeline */
    field f = {fields[i].name, offsetof(fx_pipeline, spec_data), fields[i].type, 0};
    pcache__hash h;
    memcpy(&tmp.spec_data, (uint8_t *)&si + fields[i].off, 4);
    fx_mutate(&tmp, &f);
    memcpy((uint8_t *)&si + fields[i].off, &tmp.spec_data, 4);
    h = sampler_hash(&si);
    if (pcache__hash_equal(&h, &h0))
      TEST_FAIL_("sampler: changing %s did not change the hash", fields[i].name);
  }
  red.reductionMode = VK_SAMPLER_REDUCTION_MODE_MAX;
  {
    pcache__hash h = sampler_hash(&base);
    ASSERT_TRUE(!pcache__hash_equal(&h, &h0));
  }
  red.reductionMode = VK_SAMPLER_REDUCTION_MODE_MIN;
  border.customBorderColor.float32[2] = 0.0f;
  {
    pcache__hash h = sampler_hash(&base);
    ASSERT_TRUE(!pcache__hash_equal(&h, &h0));
  }
  /* Not a custom border color: the custom color is ignored. */
  base.borderColor = VK_BORDER_COLOR_INT_OPAQUE_BLACK;
  h0 = sampler_hash(&base);
  border.customBorderColor.float32[2] = 0.5f;
  {
    pcache__hash h = sampler_hash(&base);
    ASSERT_TRUE(pcache__hash_equal(&h, &h0));
  }
}

static pcache__hash rp_hash(const VkRenderPassCreateInfo *rp) {
  pcache__desc_object *o;
  pcache__hash h;
  ASSERT_OK(pcache__desc_render_pass(rp, &o));
  h = o->hash;
  pcache__desc_object_free(o);
  return h;
}

static void render_pass_fields(void) {
  VkAttachmentDescription att[2] = {
      {0, VK_FORMAT_B8G8R8A8_UNORM, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_STORE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_PRESENT_SRC_KHR},
      {0, VK_FORMAT_D32_SFLOAT, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL}};
  VkAttachmentReference color = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference depth = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkSubpassDescription sp = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                             .colorAttachmentCount = 1,
                             .pColorAttachments = &color,
                             .pDepthStencilAttachment = &depth};
  VkSubpassDependency dep = {VK_SUBPASS_EXTERNAL, 0, 1, 2, 3, 4, 0};
  VkRenderPassCreateInfo rp = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                               .attachmentCount = 2,
                               .pAttachments = att,
                               .subpassCount = 1,
                               .pSubpasses = &sp,
                               .dependencyCount = 1,
                               .pDependencies = &dep};
  pcache__hash h0 = rp_hash(&rp), h;
  /* Compatibility ignores load/store ops and layouts. */
  att[0].loadOp = VK_ATTACHMENT_LOAD_OP_LOAD;
  att[0].finalLayout = VK_IMAGE_LAYOUT_GENERAL;
  att[1].storeOp = VK_ATTACHMENT_STORE_OP_STORE;
  color.layout = VK_IMAGE_LAYOUT_GENERAL;
  h = rp_hash(&rp);
  ASSERT_TRUE(pcache__hash_equal(&h, &h0));
  /* ...but not formats, samples, references, dependencies. */
#define CHANGES(stmt, undo)                                                                        \
  do {                                                                                             \
    stmt;                                                                                          \
    h = rp_hash(&rp);                                                                              \
    if (pcache__hash_equal(&h, &h0))                                                               \
      TEST_FAIL_("render pass: %s did not change the hash", #stmt);                               \
    undo;                                                                                          \
  } while (0)
  CHANGES(att[0].format = VK_FORMAT_R8G8B8A8_UNORM, att[0].format = VK_FORMAT_B8G8R8A8_UNORM);
  CHANGES(att[1].samples = VK_SAMPLE_COUNT_4_BIT, att[1].samples = VK_SAMPLE_COUNT_1_BIT);
  CHANGES(att[0].flags = VK_ATTACHMENT_DESCRIPTION_MAY_ALIAS_BIT, att[0].flags = 0);
  CHANGES(sp.pDepthStencilAttachment = NULL, sp.pDepthStencilAttachment = &depth);
  CHANGES(color.attachment = VK_ATTACHMENT_UNUSED, color.attachment = 0);
  CHANGES(sp.flags = 1, sp.flags = 0);
  CHANGES(dep.srcSubpass = 0, dep.srcSubpass = VK_SUBPASS_EXTERNAL);
  CHANGES(dep.dstStageMask = 8, dep.dstStageMask = 2);
  CHANGES(dep.srcAccessMask = 8, dep.srcAccessMask = 3);
  CHANGES(dep.dependencyFlags = 1, dep.dependencyFlags = 0);
  CHANGES(rp.dependencyCount = 0, rp.dependencyCount = 1);
#undef CHANGES
}

static void set_layout_fields(fx_world *w) {
  VkDescriptorSetLayoutBinding b[2] = {
      {0, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1, VK_SHADER_STAGE_VERTEX_BIT, NULL},
      {3, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, VK_SHADER_STAGE_FRAGMENT_BIT,
       &w->sampler}};
  VkDescriptorBindingFlags flags[2] = {0, VK_DESCRIPTOR_BINDING_PARTIALLY_BOUND_BIT};
  VkDescriptorSetLayoutBindingFlagsCreateInfo bf = {
      VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO, NULL, 2, flags};
  VkDescriptorSetLayoutCreateInfo sl = {VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, &bf,
                                        0, 2, b};
  pcache__desc_object *o;
  pcache__hash h0, h;
  ASSERT_OK(pcache__desc_set_layout(&sl, &w->lookup, &o));
  h0 = o->hash;
  pcache__desc_object_free(o);
#define CHANGES(stmt, undo)                                                                        \
  do {                                                                                             \
    stmt;                                                                                          \
    ASSERT_OK(pcache__desc_set_layout(&sl, &w->lookup, &o));                                       \
    h = o->hash;                                                                                   \
    pcache__desc_object_free(o);                                                                   \
    if (pcache__hash_equal(&h, &h0))                                                               \
      TEST_FAIL_("set layout: %s did not change the hash", #stmt);                                \
    undo;                                                                                          \
  } while (0)
  CHANGES(b[0].binding = 1, b[0].binding = 0);
  CHANGES(b[0].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
          b[0].descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER);
  CHANGES(b[0].descriptorCount = 2, b[0].descriptorCount = 1);
  CHANGES(b[0].stageFlags = VK_SHADER_STAGE_ALL, b[0].stageFlags = VK_SHADER_STAGE_VERTEX_BIT);
  CHANGES(b[1].pImmutableSamplers = NULL, b[1].pImmutableSamplers = &w->sampler);
  CHANGES(flags[1] = 0, flags[1] = VK_DESCRIPTOR_BINDING_PARTIALLY_BOUND_BIT);
  CHANGES(sl.flags = 1, sl.flags = 0);
#undef CHANGES
  /* Binding order in the array does not matter. */
  {
    VkDescriptorSetLayoutBinding swapped[2] = {b[1], b[0]};
    VkDescriptorBindingFlags sflags[2] = {flags[1], flags[0]};
    bf.pBindingFlags = sflags;
    sl.pBindings = swapped;
    ASSERT_OK(pcache__desc_set_layout(&sl, &w->lookup, &o));
    ASSERT_TRUE(pcache__hash_equal(&o->hash, &h0));
    pcache__desc_object_free(o);
  }
}

int main(void) {
  fx_world w;
  int n_hashed = 0, n_ignored = 0, n_unhashable = 0;
  fx_world_init(&w, 0x2000, 8);
  n_hashed += fx_run(&w, 6, full_hashed, N(full_hashed), 1);
  n_ignored += fx_run(&w, 6, full_ignored, N(full_ignored), 0);
  n_ignored += fx_run(&w, 0, basic_ignored, N(basic_ignored), 0);
  n_ignored += fx_run(&w, 3, dynamic_ignored, N(dynamic_ignored), 0);
  n_hashed += fx_run(&w, 3, dynamic_hashed, N(dynamic_hashed), 1);
  n_ignored += fx_run(&w, 7, discard_ignored, N(discard_ignored), 0);
  n_ignored += fx_run(&w, 1, stencil_ignored, N(stencil_ignored), 0);
  n_hashed += fx_run(&w, 1, stencil_hashed, N(stencil_hashed), 1);
  n_hashed += fx_run(&w, 8, multiview_hashed, N(multiview_hashed), 1);
  n_hashed += fx_run(&w, 11, compute_hashed, N(compute_hashed), 1);
  n_ignored += fx_run(&w, 11, compute_ignored, N(compute_ignored), 0);

  UNHASHABLE(6, info.pNext);
  UNHASHABLE(6, rendering.pNext);
  UNHASHABLE(6, feedback.pNext);
  UNHASHABLE(6, stages[0].pNext);
  UNHASHABLE(6, stages[3].pNext);
  UNHASHABLE(6, vi.pNext);
  UNHASHABLE(6, div.pNext);
  UNHASHABLE(6, ia.pNext);
  UNHASHABLE(6, ts.pNext);
  UNHASHABLE(6, vp.pNext);
  UNHASHABLE(6, rs.pNext);
  UNHASHABLE(6, rs_cons.pNext);
  UNHASHABLE(6, ms.pNext);
  UNHASHABLE(6, ds.pNext);
  UNHASHABLE(6, cb.pNext);
  UNHASHABLE(6, cw.pNext);
  UNHASHABLE(3, dy.pNext);
  UNHASHABLE(11, cinfo.pNext);
  UNHASHABLE(11, cinfo.stage.pNext);
  UNHASHABLE(11, subgroup.pNext);
  /* A handle no wrapper made. */
  {
    fx_pipeline *p = fx_make(&w, 0, 0);
    pcache__desc_buf b;
    pcache__desc_keys k;
    pcache__desc_buf_init(&b);
#define REFUSED_FOR(why)                                                                           \
  do {                                                                                             \
    b.unhashable_reason = NULL;                                                                    \
    ASSERT_ERR(fx_describe(p, &w, &b, &k), PCACHE_EUNHASHABLE);                                    \
    ASSERT_TRUE(b.unhashable_reason && !strcmp(b.unhashable_reason, why));                         \
  } while (0)
    p->stages[1].module = (VkShaderModule)0x4242;
    REFUSED_FOR("unrecorded_shader_module");
    p->stages[1].module = w.fs;
    p->info.layout = (VkPipelineLayout)0x4242;
    REFUSED_FOR("unrecorded_pipeline_layout");
    p->info.layout = w.layout;
    p->info.renderPass = (VkRenderPass)0x4242;
    REFUSED_FOR("unrecorded_render_pass");
#undef REFUSED_FOR
    p->info.renderPass = w.rp_color;
    p->info.subpass = 1; /* no such subpass */
    ASSERT_ERR(fx_describe(p, &w, &b, &k), PCACHE_EUNHASHABLE);
    pcache__desc_buf_release(&b);
    fx_free(p);
  }
  /* Feedback is no state: with or without it, one hash. */
  {
    fx_pipeline *p = fx_make(&w, 0, 0);
    pcache__hash h0 = fx_hash_of(p, &w), h;
    p->info.pNext = &p->feedback;
    h = fx_hash_of(p, &w);
    ASSERT_TRUE(pcache__hash_equal(&h, &h0));
    fx_free(p);
  }
  objects_unhashable();
  handles_are_not_hashed(&w);
  sampler_fields();
  render_pass_fields();
  set_layout_fields(&w);
  printf("hashed fields: %d, ignored fields: %d, unknown pNext places: %d\n", n_hashed, n_ignored,
         n_unhashable);
  fx_world_free(&w);
  return 0;
}
