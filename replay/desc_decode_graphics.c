/* The decoder's graphics pipelines: the fixed-function state structs and
 * the pNext structs that carry the rest of it. */
#include "desc_decode_graphics.h"

#include <string.h>

#include <pcache/pcache.h>

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
    at[i] =
        (VkVertexInputAttributeDescription){v->attributes[i]->location, v->attributes[i]->binding,
                                            v->attributes[i]->format, v->attributes[i]->offset};
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

static int decode_rasterization(struct pcache__desc_arena *a, const Pcachepb__RasterizationDesc *s,
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

int pcache__desc_decode_fixed_function(struct pcache__desc_arena *a,
                                       const Pcachepb__PipelineDesc *m,
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
        vs[i] = (VkViewport){v->viewports[i]->x,         v->viewports[i]->y,
                             v->viewports[i]->width,     v->viewports[i]->height,
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
    if (v->negative_one_to_one) {
      VkPipelineViewportDepthClipControlCreateInfoEXT *clip;
      ALLOC(a, clip, 1);
      clip->sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_DEPTH_CLIP_CONTROL_CREATE_INFO_EXT;
      clip->negativeOneToOne = VK_TRUE;
      vp->pNext = clip;
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
          c->blend_enable,   c->src_color_blend_factor, c->dst_color_blend_factor,
          c->color_blend_op, c->src_alpha_blend_factor, c->dst_alpha_blend_factor,
          c->alpha_blend_op, c->color_write_mask};
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
