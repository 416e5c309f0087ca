/* The decoder: a stored PipelineDesc back into Vulkan create infos, and the
 * objects those name, so a pipeline can be rebuilt (replayed) on another
 * driver. It reads through protobuf-c (speed does not matter here) and
 * builds into an arena freed at once. What the canonical form left out
 * (layouts, load/store ops, ignored state) gets neutral values; describing
 * the result again gives the same bytes (tests/desc checks this).
 *
 * The bytes may come from anywhere (an import, a fuzzer): every index and
 * count that Vulkan would follow is checked before it is used. */
#include "replay/desc_decode.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/desc_check.h"
#include "proto/pcache.pb-c.h"

struct chunk {
  struct chunk *next;
  size_t size, used;
  max_align_t data[];
};

struct pcache__desc_arena {
  struct chunk *chunks;
  Pcachepb__PipelineDesc *msg;
  VkPipelineShaderStageCreateInfo *stages;
};

static void *arena_alloc(struct pcache__desc_arena *a, size_t count, size_t size) {
  struct chunk *c = a->chunks;
  size_t n;
  void *p;
  if (count == 0)
    return NULL;
  if (size && count > SIZE_MAX / 2 / size)
    return NULL;
  n = (count * size + 15) & ~(size_t)15;
  if (!c || c->size - c->used < n) {
    size_t cap = n > 16384 ? n : 16384;
    c = pcache__malloc(sizeof(*c) + cap);
    if (!c)
      return NULL;
    c->size = cap;
    c->used = 0;
    c->next = a->chunks;
    a->chunks = c;
  }
  p = (uint8_t *)c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

/* An allocation that failed only when count was nonzero. */
#define ALLOC(a, ptr, count)                                                                       \
  do {                                                                                             \
    (ptr) = arena_alloc((a), (count), sizeof(*(ptr)));                                             \
    if ((count) && !(ptr))                                                                         \
      return -ENOMEM;                                                                              \
  } while (0)

static int decode_sampler(struct pcache__desc_arena *a, const Pcachepb__SamplerDesc *s,
                          VkSamplerCreateInfo *ret) {
  const void *next = NULL;
  *ret = (VkSamplerCreateInfo){
      .sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
      .flags = s->flags,
      .magFilter = s->mag_filter,
      .minFilter = s->min_filter,
      .mipmapMode = s->mipmap_mode,
      .addressModeU = s->address_mode_u,
      .addressModeV = s->address_mode_v,
      .addressModeW = s->address_mode_w,
      .mipLodBias = s->mip_lod_bias,
      .anisotropyEnable = s->anisotropy_enable,
      .maxAnisotropy = s->max_anisotropy,
      .compareEnable = s->compare_enable,
      .compareOp = s->compare_op,
      .minLod = s->min_lod,
      .maxLod = s->max_lod,
      .borderColor = s->border_color,
      .unnormalizedCoordinates = s->unnormalized_coordinates,
  };
  if (s->custom_border_color.len) {
    VkSamplerCustomBorderColorCreateInfoEXT *b;
    if (s->custom_border_color.len != sizeof(b->customBorderColor))
      return PCACHE_EBAD_DESC;
    ALLOC(a, b, 1);
    b->sType = VK_STRUCTURE_TYPE_SAMPLER_CUSTOM_BORDER_COLOR_CREATE_INFO_EXT;
    b->pNext = next;
    memcpy(&b->customBorderColor, s->custom_border_color.data, sizeof(b->customBorderColor));
    b->format = s->custom_border_format;
    next = b;
  }
  if (s->reduction_mode) {
    VkSamplerReductionModeCreateInfo *m;
    ALLOC(a, m, 1);
    m->sType = VK_STRUCTURE_TYPE_SAMPLER_REDUCTION_MODE_CREATE_INFO;
    m->pNext = next;
    m->reductionMode = s->reduction_mode;
    next = m;
  }
  ret->pNext = next;
  return 0;
}

static int decode_layout(struct pcache__desc_arena *a, const Pcachepb__PipelineLayoutDesc *l,
                         pcache__desc_decoded *d) {
  uint32_t n_samplers = 0, si = 0;
  int r;
  d->layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  if (!l)
    return 0;
  for (size_t i = 0; i < l->n_set_layouts; i++)
    for (size_t j = 0; j < l->set_layouts[i]->n_bindings; j++) {
      const Pcachepb__SetLayoutBindingDesc *b = l->set_layouts[i]->bindings[j];
      if (b->n_immutable_samplers && b->n_immutable_samplers != b->descriptor_count)
        return PCACHE_EBAD_DESC;
      n_samplers += (uint32_t)b->n_immutable_samplers;
    }
  ALLOC(a, d->sampler_infos, n_samplers);
  ALLOC(a, d->samplers, n_samplers);
  d->n_samplers = n_samplers;
  ALLOC(a, d->set_layout_infos, l->n_set_layouts);
  ALLOC(a, d->set_layouts, l->n_set_layouts);
  d->n_set_layouts = (uint32_t)l->n_set_layouts;
  for (size_t i = 0; i < l->n_set_layouts; i++) {
    const Pcachepb__SetLayoutDesc *sl = l->set_layouts[i];
    VkDescriptorSetLayoutCreateInfo *info = &d->set_layout_infos[i];
    VkDescriptorSetLayoutBinding *bindings;
    VkDescriptorBindingFlags *flags;
    int any_flags = 0;
    ALLOC(a, bindings, sl->n_bindings);
    ALLOC(a, flags, sl->n_bindings);
    for (size_t j = 0; j < sl->n_bindings; j++) {
      const Pcachepb__SetLayoutBindingDesc *b = sl->bindings[j];
      bindings[j] = (VkDescriptorSetLayoutBinding){
          .binding = b->binding,
          .descriptorType = b->descriptor_type,
          .descriptorCount = b->descriptor_count,
          .stageFlags = b->stage_flags,
      };
      if (b->n_immutable_samplers) {
        bindings[j].pImmutableSamplers = &d->samplers[si];
        for (size_t k = 0; k < b->n_immutable_samplers; k++) {
          r = decode_sampler(a, b->immutable_samplers[k], &d->sampler_infos[si++]);
          if (r < 0)
            return r;
        }
      }
      flags[j] = b->binding_flags;
      any_flags |= b->binding_flags != 0;
    }
    *info = (VkDescriptorSetLayoutCreateInfo){
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = sl->flags,
        .bindingCount = (uint32_t)sl->n_bindings,
        .pBindings = bindings,
    };
    if (any_flags) {
      VkDescriptorSetLayoutBindingFlagsCreateInfo *f;
      ALLOC(a, f, 1);
      f->sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO;
      f->bindingCount = (uint32_t)sl->n_bindings;
      f->pBindingFlags = flags;
      info->pNext = f;
    }
  }
  d->layout_info.flags = l->flags;
  d->layout_info.setLayoutCount = (uint32_t)l->n_set_layouts;
  d->layout_info.pSetLayouts = d->set_layouts;
  if (l->n_push_constant_ranges) {
    VkPushConstantRange *p;
    ALLOC(a, p, l->n_push_constant_ranges);
    for (size_t i = 0; i < l->n_push_constant_ranges; i++)
      p[i] = (VkPushConstantRange){l->push_constant_ranges[i]->stage_flags,
                                   l->push_constant_ranges[i]->offset,
                                   l->push_constant_ranges[i]->size};
    d->layout_info.pushConstantRangeCount = (uint32_t)l->n_push_constant_ranges;
    d->layout_info.pPushConstantRanges = p;
  }
  return 0;
}

static int decode_refs(struct pcache__desc_arena *a, Pcachepb__AttachmentRefDesc *const *refs,
                       size_t n, uint32_t n_attachments, int input,
                       VkAttachmentReference2 **ret) {
  VkAttachmentReference2 *out;
  ALLOC(a, out, n);
  for (size_t i = 0; i < n; i++) {
    uint32_t att = refs[i]->attachment;
    if (att != VK_ATTACHMENT_UNUSED && att >= n_attachments)
      return PCACHE_EBAD_DESC;
    out[i] = (VkAttachmentReference2){
        .sType = VK_STRUCTURE_TYPE_ATTACHMENT_REFERENCE_2,
        .attachment = att,
        .layout = att == VK_ATTACHMENT_UNUSED ? VK_IMAGE_LAYOUT_UNDEFINED : VK_IMAGE_LAYOUT_GENERAL,
        .aspectMask = input ? refs[i]->aspect_mask : 0,
    };
  }
  *ret = out;
  return 0;
}

/* Load/store ops and layouts are not part of compatibility: the neutral
 * choices below make a render pass compatible with the original. */
static int decode_render_pass(struct pcache__desc_arena *a, const Pcachepb__RenderPassDesc *rp,
                              VkRenderPassCreateInfo2 *ret) {
  VkAttachmentDescription2 *atts;
  VkSubpassDescription2 *subs;
  VkSubpassDependency2 *deps;
  uint32_t n_att = (uint32_t)rp->n_attachments;
  int r;
  ALLOC(a, atts, rp->n_attachments);
  ALLOC(a, subs, rp->n_subpasses);
  ALLOC(a, deps, rp->n_dependencies);
  for (size_t i = 0; i < rp->n_attachments; i++)
    atts[i] = (VkAttachmentDescription2){
        .sType = VK_STRUCTURE_TYPE_ATTACHMENT_DESCRIPTION_2,
        .flags = rp->attachments[i]->flags,
        .format = rp->attachments[i]->format,
        .samples = rp->attachments[i]->samples,
        .loadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        .storeOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
        .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
        .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
        .finalLayout = VK_IMAGE_LAYOUT_GENERAL,
    };
  for (size_t i = 0; i < rp->n_subpasses; i++) {
    const Pcachepb__SubpassDesc *s = rp->subpasses[i];
    VkAttachmentReference2 *in, *color, *resolve, *depth = NULL;
    if (s->n_resolve_attachments && s->n_resolve_attachments != s->n_color_attachments)
      return PCACHE_EBAD_DESC;
    if ((r = decode_refs(a, s->input_attachments, s->n_input_attachments, n_att, 1, &in)) < 0 ||
        (r = decode_refs(a, s->color_attachments, s->n_color_attachments, n_att, 0, &color)) <
            0 ||
        (r = decode_refs(a, s->resolve_attachments, s->n_resolve_attachments, n_att, 0,
                         &resolve)) < 0)
      return r;
    if (s->depth_stencil_attachment &&
        (r = decode_refs(a, &s->depth_stencil_attachment, 1, n_att, 0, &depth)) < 0)
      return r;
    subs[i] = (VkSubpassDescription2){
        .sType = VK_STRUCTURE_TYPE_SUBPASS_DESCRIPTION_2,
        .flags = s->flags,
        .pipelineBindPoint = s->bind_point,
        .viewMask = s->view_mask,
        .inputAttachmentCount = (uint32_t)s->n_input_attachments,
        .pInputAttachments = in,
        .colorAttachmentCount = (uint32_t)s->n_color_attachments,
        .pColorAttachments = color,
        .pResolveAttachments = resolve,
        .pDepthStencilAttachment = depth,
    };
  }
  for (size_t i = 0; i < rp->n_dependencies; i++) {
    const Pcachepb__SubpassDependencyDesc *dep = rp->dependencies[i];
    deps[i] = (VkSubpassDependency2){
        .sType = VK_STRUCTURE_TYPE_SUBPASS_DEPENDENCY_2,
        .srcSubpass = dep->src_subpass,
        .dstSubpass = dep->dst_subpass,
        .srcStageMask = dep->src_stage_mask,
        .dstStageMask = dep->dst_stage_mask,
        .srcAccessMask = dep->src_access_mask,
        .dstAccessMask = dep->dst_access_mask,
        .dependencyFlags = dep->dependency_flags,
        .viewOffset = dep->view_offset,
    };
  }
  *ret = (VkRenderPassCreateInfo2){
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO_2,
      .flags = rp->flags,
      .attachmentCount = n_att,
      .pAttachments = atts,
      .subpassCount = (uint32_t)rp->n_subpasses,
      .pSubpasses = subs,
      .dependencyCount = (uint32_t)rp->n_dependencies,
      .pDependencies = deps,
      .correlatedViewMaskCount = (uint32_t)rp->n_correlated_view_masks,
      .pCorrelatedViewMasks = rp->correlated_view_masks,
  };
  return 0;
}

static int decode_stages(struct pcache__desc_arena *a, const Pcachepb__PipelineDesc *m,
                         pcache__desc_code_fn code, void *code_ctx, pcache__desc_decoded *d) {
  int r;
  if (m->n_stages > PCACHE_DESC_MAX_MODULES)
    return PCACHE_EBAD_DESC;
  ALLOC(a, a->stages, m->n_stages);
  ALLOC(a, d->module_hashes, m->n_stages);
  ALLOC(a, d->module_infos, m->n_stages);
  ALLOC(a, d->modules, m->n_stages);
  d->n_modules = (uint32_t)m->n_stages;
  for (size_t i = 0; i < m->n_stages; i++) {
    const Pcachepb__ShaderStageDesc *s = m->stages[i];
    VkPipelineShaderStageCreateInfo *st = &a->stages[i];
    if (!s->module || s->module->spirv_hash.len != PCACHE_HASH_SIZE)
      return PCACHE_EBAD_DESC;
    memcpy(d->module_hashes[i].bytes, s->module->spirv_hash.data, PCACHE_HASH_SIZE);
    d->module_infos[i].sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    if (code) {
      const uint32_t *words;
      size_t size;
      r = code(code_ctx, &d->module_hashes[i], &words, &size);
      if (r < 0)
        return r;
      d->module_infos[i].pCode = words;
      d->module_infos[i].codeSize = size;
    }
    *st = (VkPipelineShaderStageCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
        .flags = s->flags,
        .stage = s->stage,
        .pName = s->entry_point,
    };
    if (s->n_specialization) {
      VkSpecializationInfo *spec;
      VkSpecializationMapEntry *entries;
      uint8_t *data;
      size_t total = 0;
      for (size_t j = 0; j < s->n_specialization; j++)
        total += s->specialization[j]->data.len; /* bounded by the message size */
      ALLOC(a, spec, 1);
      ALLOC(a, entries, s->n_specialization);
      ALLOC(a, data, total);
      total = 0;
      for (size_t j = 0; j < s->n_specialization; j++) {
        const ProtobufCBinaryData *b = &s->specialization[j]->data;
        entries[j] = (VkSpecializationMapEntry){s->specialization[j]->constant_id,
                                                (uint32_t)total, b->len};
        if (b->len)
          memcpy(data + total, b->data, b->len);
        total += b->len;
      }
      *spec = (VkSpecializationInfo){(uint32_t)s->n_specialization, entries, total, data};
      st->pSpecializationInfo = spec;
    }
    if (s->required_subgroup_size) {
      VkPipelineShaderStageRequiredSubgroupSizeCreateInfo *sg;
      ALLOC(a, sg, 1);
      sg->sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO;
      sg->requiredSubgroupSize = s->required_subgroup_size;
      st->pNext = sg;
    }
  }
  return 0;
}

static int decode_vertex_input(struct pcache__desc_arena *a, const Pcachepb__VertexInputDesc *v,
                               VkGraphicsPipelineCreateInfo *g) {
  VkPipelineVertexInputStateCreateInfo *vi;
  VkVertexInputBindingDescription *b;
  VkVertexInputAttributeDescription *at;
  VkVertexInputBindingDivisorDescriptionEXT *div;
  uint32_t n_div = 0;
  ALLOC(a, vi, 1);
  ALLOC(a, b, v->n_bindings);
  ALLOC(a, div, v->n_bindings);
  ALLOC(a, at, v->n_attributes);
  for (size_t i = 0; i < v->n_bindings; i++) {
    const Pcachepb__VertexBindingDesc *s = v->bindings[i];
    b[i] = (VkVertexInputBindingDescription){s->binding, s->stride, s->input_rate};
    if (s->input_rate == VK_VERTEX_INPUT_RATE_INSTANCE && s->divisor != 1)
      div[n_div++] = (VkVertexInputBindingDivisorDescriptionEXT){s->binding, s->divisor};
  }
  for (size_t i = 0; i < v->n_attributes; i++)
    at[i] = (VkVertexInputAttributeDescription){v->attributes[i]->location,
                                                v->attributes[i]->binding,
                                                v->attributes[i]->format,
                                                v->attributes[i]->offset};
  *vi = (VkPipelineVertexInputStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
      .vertexBindingDescriptionCount = (uint32_t)v->n_bindings,
      .pVertexBindingDescriptions = b,
      .vertexAttributeDescriptionCount = (uint32_t)v->n_attributes,
      .pVertexAttributeDescriptions = at,
  };
  if (n_div) {
    VkPipelineVertexInputDivisorStateCreateInfoEXT *ds;
    ALLOC(a, ds, 1);
    ds->sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_DIVISOR_STATE_CREATE_INFO_EXT;
    ds->vertexBindingDivisorCount = n_div;
    ds->pVertexBindingDivisors = div;
    vi->pNext = ds;
  }
  g->pVertexInputState = vi;
  return 0;
}

static int decode_rasterization(struct pcache__desc_arena *a,
                                const Pcachepb__RasterizationDesc *s,
                                VkGraphicsPipelineCreateInfo *g) {
  VkPipelineRasterizationStateCreateInfo *rs;
  const void *next = NULL;
  ALLOC(a, rs, 1);
  *rs = (VkPipelineRasterizationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .depthClampEnable = s->depth_clamp_enable,
      .rasterizerDiscardEnable = s->rasterizer_discard_enable,
      .polygonMode = s->polygon_mode,
      .cullMode = s->cull_mode,
      .frontFace = s->front_face,
      .depthBiasEnable = s->depth_bias_enable,
      .depthBiasConstantFactor = s->depth_bias_constant_factor,
      .depthBiasClamp = s->depth_bias_clamp,
      .depthBiasSlopeFactor = s->depth_bias_slope_factor,
      .lineWidth = s->line_width,
  };
  if (s->conservative_mode || s->extra_primitive_overestimation_size != 0.0f) {
    VkPipelineRasterizationConservativeStateCreateInfoEXT *c;
    ALLOC(a, c, 1);
    c->sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_CONSERVATIVE_STATE_CREATE_INFO_EXT;
    c->pNext = next;
    c->conservativeRasterizationMode = s->conservative_mode;
    c->extraPrimitiveOverestimationSize = s->extra_primitive_overestimation_size;
    next = c;
  }
  if (s->rasterization_stream) {
    VkPipelineRasterizationStateStreamCreateInfoEXT *c;
    ALLOC(a, c, 1);
    c->sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_STREAM_CREATE_INFO_EXT;
    c->pNext = next;
    c->rasterizationStream = s->rasterization_stream;
    next = c;
  }
  if (s->line_rasterization_mode || s->stippled_line_enable) {
    VkPipelineRasterizationLineStateCreateInfoEXT *c;
    ALLOC(a, c, 1);
    c->sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_LINE_STATE_CREATE_INFO_EXT;
    c->pNext = next;
    c->lineRasterizationMode = s->line_rasterization_mode;
    c->stippledLineEnable = s->stippled_line_enable;
    c->lineStippleFactor = s->line_stipple_factor;
    c->lineStipplePattern = (uint16_t)s->line_stipple_pattern;
    next = c;
  }
  if (s->depth_clip_inverted) {
    VkPipelineRasterizationDepthClipStateCreateInfoEXT *c;
    ALLOC(a, c, 1);
    c->sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT;
    c->pNext = next;
    c->depthClipEnable = s->depth_clamp_enable;
    next = c;
  }
  if (s->provoking_vertex_mode) {
    VkPipelineRasterizationProvokingVertexStateCreateInfoEXT *c;
    ALLOC(a, c, 1);
    c->sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_PROVOKING_VERTEX_STATE_CREATE_INFO_EXT;
    c->pNext = next;
    c->provokingVertexMode = s->provoking_vertex_mode;
    next = c;
  }
  rs->pNext = next;
  g->pRasterizationState = rs;
  return 0;
}

static void stencil(VkStencilOpState *o, const Pcachepb__StencilOpDesc *s) {
  if (!s)
    return;
  *o = (VkStencilOpState){s->fail_op,      s->pass_op,    s->depth_fail_op, s->compare_op,
                         s->compare_mask, s->write_mask, s->reference};
}

static int decode_fixed_function(struct pcache__desc_arena *a, const Pcachepb__PipelineDesc *m,
                                 VkGraphicsPipelineCreateInfo *g) {
  int r;
  if (m->vertex_input && (r = decode_vertex_input(a, m->vertex_input, g)) < 0)
    return r;
  if (m->input_assembly) {
    VkPipelineInputAssemblyStateCreateInfo *ia;
    ALLOC(a, ia, 1);
    ia->sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO;
    ia->topology = m->input_assembly->topology;
    ia->primitiveRestartEnable = m->input_assembly->primitive_restart_enable;
    g->pInputAssemblyState = ia;
  }
  if (m->tessellation) {
    VkPipelineTessellationStateCreateInfo *ts;
    ALLOC(a, ts, 1);
    ts->sType = VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_STATE_CREATE_INFO;
    ts->patchControlPoints = m->tessellation->patch_control_points;
    if (m->tessellation->domain_origin) {
      VkPipelineTessellationDomainOriginStateCreateInfo *o;
      ALLOC(a, o, 1);
      o->sType = VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_DOMAIN_ORIGIN_STATE_CREATE_INFO;
      o->domainOrigin = m->tessellation->domain_origin;
      ts->pNext = o;
    }
    g->pTessellationState = ts;
  }
  if (m->viewport) {
    const Pcachepb__ViewportDesc *v = m->viewport;
    VkPipelineViewportStateCreateInfo *vp;
    ALLOC(a, vp, 1);
    vp->sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO;
    vp->viewportCount = v->viewport_count;
    vp->scissorCount = v->scissor_count;
    /* Values are there for every counted viewport or for none. */
    if (v->n_viewports) {
      VkViewport *vs;
      if (v->n_viewports != v->viewport_count)
        return PCACHE_EBAD_DESC;
      ALLOC(a, vs, v->n_viewports);
      for (size_t i = 0; i < v->n_viewports; i++)
        vs[i] = (VkViewport){v->viewports[i]->x,      v->viewports[i]->y,
                             v->viewports[i]->width,  v->viewports[i]->height,
                             v->viewports[i]->min_depth, v->viewports[i]->max_depth};
      vp->pViewports = vs;
    }
    if (v->n_scissors) {
      VkRect2D *ss;
      if (v->n_scissors != v->scissor_count)
        return PCACHE_EBAD_DESC;
      ALLOC(a, ss, v->n_scissors);
      for (size_t i = 0; i < v->n_scissors; i++)
        ss[i] = (VkRect2D){{v->scissors[i]->x, v->scissors[i]->y},
                           {v->scissors[i]->width, v->scissors[i]->height}};
      vp->pScissors = ss;
    }
    g->pViewportState = vp;
  }
  if (m->rasterization && (r = decode_rasterization(a, m->rasterization, g)) < 0)
    return r;
  if (m->multisample) {
    const Pcachepb__MultisampleDesc *s = m->multisample;
    VkPipelineMultisampleStateCreateInfo *ms;
    ALLOC(a, ms, 1);
    *ms = (VkPipelineMultisampleStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
        .rasterizationSamples = s->rasterization_samples,
        .sampleShadingEnable = s->sample_shading_enable,
        .minSampleShading = s->min_sample_shading,
        .alphaToCoverageEnable = s->alpha_to_coverage_enable,
        .alphaToOneEnable = s->alpha_to_one_enable,
    };
    if (s->n_sample_mask) {
      /* Vulkan reads ceil(samples / 32) words: pad with all-ones. */
      uint32_t *mask;
      ALLOC(a, mask, 2);
      mask[0] = mask[1] = 0xffffffffu;
      memcpy(mask, s->sample_mask, (s->n_sample_mask > 2 ? 2 : s->n_sample_mask) * 4);
      ms->pSampleMask = mask;
    }
    g->pMultisampleState = ms;
  }
  if (m->depth_stencil) {
    const Pcachepb__DepthStencilDesc *s = m->depth_stencil;
    VkPipelineDepthStencilStateCreateInfo *ds;
    ALLOC(a, ds, 1);
    *ds = (VkPipelineDepthStencilStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
        .flags = s->flags,
        .depthTestEnable = s->depth_test_enable,
        .depthWriteEnable = s->depth_write_enable,
        .depthCompareOp = s->depth_compare_op,
        .depthBoundsTestEnable = s->depth_bounds_test_enable,
        .stencilTestEnable = s->stencil_test_enable,
        .minDepthBounds = s->min_depth_bounds,
        .maxDepthBounds = s->max_depth_bounds,
    };
    stencil(&ds->front, s->front);
    stencil(&ds->back, s->back);
    g->pDepthStencilState = ds;
  }
  if (m->color_blend) {
    const Pcachepb__ColorBlendDesc *s = m->color_blend;
    VkPipelineColorBlendStateCreateInfo *cb;
    VkPipelineColorBlendAttachmentState *att;
    VkBool32 *enables;
    int any_disabled = 0;
    ALLOC(a, cb, 1);
    ALLOC(a, att, s->n_attachments);
    ALLOC(a, enables, s->n_attachments);
    for (size_t i = 0; i < s->n_attachments; i++) {
      const Pcachepb__ColorBlendAttachmentDesc *c = s->attachments[i];
      att[i] = (VkPipelineColorBlendAttachmentState){
          c->blend_enable,           c->src_color_blend_factor, c->dst_color_blend_factor,
          c->color_blend_op,         c->src_alpha_blend_factor, c->dst_alpha_blend_factor,
          c->alpha_blend_op,         c->color_write_mask};
      enables[i] = !c->color_write_disabled;
      any_disabled |= c->color_write_disabled;
    }
    *cb = (VkPipelineColorBlendStateCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
        .flags = s->flags,
        .logicOpEnable = s->logic_op_enable,
        .logicOp = s->logic_op,
        .attachmentCount = (uint32_t)s->n_attachments,
        .pAttachments = att,
    };
    for (size_t i = 0; i < 4 && i < s->n_blend_constants; i++)
      cb->blendConstants[i] = s->blend_constants[i];
    if (any_disabled) {
      VkPipelineColorWriteCreateInfoEXT *cw;
      ALLOC(a, cw, 1);
      cw->sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_WRITE_CREATE_INFO_EXT;
      cw->attachmentCount = (uint32_t)s->n_attachments;
      cw->pColorWriteEnables = enables;
      cb->pNext = cw;
    }
    g->pColorBlendState = cb;
  }
  if (m->n_dynamic_states) {
    VkPipelineDynamicStateCreateInfo *dy;
    ALLOC(a, dy, 1);
    dy->sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO;
    dy->dynamicStateCount = (uint32_t)m->n_dynamic_states;
    dy->pDynamicStates = (const VkDynamicState *)m->dynamic_states;
    g->pDynamicState = dy;
  }
  return 0;
}

void pcache__desc_decoded_free(pcache__desc_decoded *decoded) {
  struct chunk *c, *next;
  if (!decoded)
    return;
  if (decoded->arena) {
    if (decoded->arena->msg)
      pcachepb__pipeline_desc__free_unpacked(decoded->arena->msg, &pcache__pb_allocator);
    for (c = decoded->arena->chunks; c; c = next) {
      next = c->next;
      pcache__free(c);
    }
    pcache__free(decoded->arena);
  }
  pcache__free(decoded);
}

static int decode_all(pcache__desc_decoded *d, pcache__desc_code_fn code, void *code_ctx) {
  struct pcache__desc_arena *a = d->arena;
  const Pcachepb__PipelineDesc *m = a->msg;
  int r;
  if (m->format_version != PCACHE_DESC_FORMAT_VERSION)
    return PCACHE_EBAD_DESC;
  d->kind = (uint32_t)m->kind;
  if (d->kind != 1 && d->kind != 2)
    return PCACHE_EBAD_DESC;
  if ((r = decode_layout(a, m->layout, d)) < 0 || (r = decode_stages(a, m, code, code_ctx, d)) < 0)
    return r;
  if (d->kind == 2) {
    if (m->n_stages != 1)
      return PCACHE_EBAD_DESC;
    d->compute = (VkComputePipelineCreateInfo){
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = m->flags,
        .stage = a->stages[0],
        .basePipelineIndex = -1,
    };
    return 0;
  }
  d->graphics = (VkGraphicsPipelineCreateInfo){
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
      .flags = m->flags,
      .stageCount = (uint32_t)m->n_stages,
      .pStages = a->stages,
      .subpass = m->subpass,
      .basePipelineIndex = -1,
  };
  if (m->render_pass) {
    if (m->subpass >= m->render_pass->n_subpasses)
      return PCACHE_EBAD_DESC;
    r = decode_render_pass(a, m->render_pass, &d->render_pass_info);
    if (r < 0)
      return r;
    d->has_render_pass = 1;
  } else if (m->rendering) {
    VkPipelineRenderingCreateInfo *ri;
    ALLOC(a, ri, 1);
    ri->sType = VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO;
    ri->viewMask = m->rendering->view_mask;
    ri->colorAttachmentCount = (uint32_t)m->rendering->n_color_formats;
    ri->pColorAttachmentFormats = (const VkFormat *)m->rendering->color_formats;
    ri->depthAttachmentFormat = m->rendering->depth_format;
    ri->stencilAttachmentFormat = m->rendering->stencil_format;
    d->graphics.pNext = ri;
  }
  return decode_fixed_function(a, m, &d->graphics);
}

int pcache__desc_decode(const uint8_t *desc, size_t size, pcache__desc_code_fn code, void *code_ctx,
                        pcache__desc_decoded **ret_decoded) {
  pcache__desc_decoded *d;
  int r;
  d = pcache__calloc(1, sizeof(*d));
  if (!d)
    return -ENOMEM;
  d->arena = pcache__calloc(1, sizeof(*d->arena));
  if (!d->arena) {
    r = -ENOMEM;
    goto out_free;
  }
  d->arena->msg = pcachepb__pipeline_desc__unpack(&pcache__pb_allocator, size, desc);
  if (!d->arena->msg) {
    r = PCACHE_EBAD_DESC;
    goto out_free;
  }
  r = decode_all(d, code, code_ctx);
  if (r < 0)
    goto out_free;
  *ret_decoded = d;
  return 0;
out_free:
  pcache__desc_decoded_free(d);
  return r;
}

void pcache__desc_decoded_link(pcache__desc_decoded *d) {
  for (uint32_t i = 0; i < d->n_modules; i++)
    d->arena->stages[i].module = d->modules[i];
  if (d->kind == 2) {
    d->compute.stage.module = d->n_modules ? d->modules[0] : VK_NULL_HANDLE;
    d->compute.layout = d->layout;
  } else {
    d->graphics.layout = d->layout;
    d->graphics.renderPass = d->render_pass;
  }
}

static int vk_error(VkResult v) {
  return v == VK_ERROR_OUT_OF_HOST_MEMORY || v == VK_ERROR_OUT_OF_DEVICE_MEMORY ? -ENOMEM : -EIO;
}

int pcache__desc_decoded_create_objects(pcache__desc_decoded *d, VkDevice device,
                                        const VkAllocationCallbacks *alloc) {
  VkResult v = VK_SUCCESS;
  for (uint32_t i = 0; i < d->n_modules; i++)
    if (!d->module_infos[i].codeSize)
      return PCACHE_EMISSING_MODULE;
  for (uint32_t i = 0; v == VK_SUCCESS && i < d->n_samplers; i++)
    v = vkCreateSampler(device, &d->sampler_infos[i], alloc, &d->samplers[i]);
  for (uint32_t i = 0; v == VK_SUCCESS && i < d->n_set_layouts; i++)
    v = vkCreateDescriptorSetLayout(device, &d->set_layout_infos[i], alloc, &d->set_layouts[i]);
  if (v == VK_SUCCESS)
    v = vkCreatePipelineLayout(device, &d->layout_info, alloc, &d->layout);
  if (v == VK_SUCCESS && d->has_render_pass)
    v = vkCreateRenderPass2(device, &d->render_pass_info, alloc, &d->render_pass);
  for (uint32_t i = 0; v == VK_SUCCESS && i < d->n_modules; i++)
    v = vkCreateShaderModule(device, &d->module_infos[i], alloc, &d->modules[i]);
  if (v != VK_SUCCESS) {
    pcache__desc_decoded_destroy_objects(d, device, alloc);
    return vk_error(v);
  }
  pcache__desc_decoded_link(d);
  return 0;
}

int pcache__desc_decoded_create_pipeline(const pcache__desc_decoded *d, VkDevice device,
                                         VkPipelineCache cache, const VkAllocationCallbacks *alloc,
                                         VkPipeline *ret_pipeline) {
  VkResult v;
  if (d->kind == 2)
    v = vkCreateComputePipelines(device, cache, 1, &d->compute, alloc, ret_pipeline);
  else
    v = vkCreateGraphicsPipelines(device, cache, 1, &d->graphics, alloc, ret_pipeline);
  return v == VK_SUCCESS ? 0 : vk_error(v);
}

void pcache__desc_decoded_destroy_objects(pcache__desc_decoded *d, VkDevice device,
                                          const VkAllocationCallbacks *alloc) {
  for (uint32_t i = 0; i < d->n_modules; i++) {
    vkDestroyShaderModule(device, d->modules[i], alloc);
    d->modules[i] = VK_NULL_HANDLE;
  }
  vkDestroyRenderPass(device, d->render_pass, alloc);
  d->render_pass = VK_NULL_HANDLE;
  vkDestroyPipelineLayout(device, d->layout, alloc);
  d->layout = VK_NULL_HANDLE;
  for (uint32_t i = 0; i < d->n_set_layouts; i++) {
    vkDestroyDescriptorSetLayout(device, d->set_layouts[i], alloc);
    d->set_layouts[i] = VK_NULL_HANDLE;
  }
  for (uint32_t i = 0; i < d->n_samplers; i++) {
    vkDestroySampler(device, d->samplers[i], alloc);
    d->samplers[i] = VK_NULL_HANDLE;
  }
  pcache__desc_decoded_link(d);
}
