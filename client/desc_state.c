/* The describer's graphics state: the fixed-function state structs of a
 * graphics pipeline and the pNext structs that change them, each written
 * without what the pipeline's dynamic state leaves to the command buffer.
 * Its own file, under desc_graphics.c, which decides which parts and
 * which of their state a create info carries and calls these for each:
 * these only write what they are given. */
#include "desc_internal.h"

#include <string.h>

#include <pcache/pcache.h>

static uint32_t dyn_bit(VkDynamicState s) {
  if ((uint32_t)s <= VK_DYNAMIC_STATE_STENCIL_REFERENCE)
    return 1u << s;
  if (s >= VK_DYNAMIC_STATE_CULL_MODE && s <= VK_DYNAMIC_STATE_STENCIL_OP)
    return 1u << (9 + (s - VK_DYNAMIC_STATE_CULL_MODE));
  if (s >= VK_DYNAMIC_STATE_PATCH_CONTROL_POINTS_EXT &&
      s <= VK_DYNAMIC_STATE_PRIMITIVE_RESTART_ENABLE)
    return 1u << (21 + (s - VK_DYNAMIC_STATE_PATCH_CONTROL_POINTS_EXT));
  if (s == VK_DYNAMIC_STATE_LINE_STIPPLE_EXT)
    return DYN_LINE_STIPPLE;
  if (s == VK_DYNAMIC_STATE_COLOR_WRITE_ENABLE_EXT)
    return DYN_COLOR_WRITE_ENABLE;
  if (s == VK_DYNAMIC_STATE_VERTEX_INPUT_EXT)
    return DYN_VERTEX_INPUT;
  return 0;
}

static int put_vertex_input(pcache__desc_writer *w, const VkPipelineVertexInputStateCreateInfo *vi,
                            uint32_t dyn) {
  const VkPipelineVertexInputDivisorStateCreateInfoEXT *div = NULL;
  size_t m;
  for (const VkBaseInStructure *s = vi->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_DIVISOR_STATE_CREATE_INFO_EXT)
      return desc_unhashable(w, "pnext", (uint32_t)s->sType);
    div = (const void *)s;
  }
  m = msg_begin(w, 9);
  for (uint32_t i = 0; i < vi->vertexBindingDescriptionCount; i++) {
    const VkVertexInputBindingDescription *b = &vi->pVertexBindingDescriptions[i];
    size_t n = msg_begin(w, 1);
    put_u32(w, 1, b->binding);
    if (!(dyn & DYN_VERTEX_INPUT_BINDING_STRIDE))
      put_u32(w, 2, b->stride);
    put_u32(w, 3, b->inputRate);
    if (b->inputRate == VK_VERTEX_INPUT_RATE_INSTANCE) {
      uint32_t d = 1;
      for (uint32_t j = 0; div && j < div->vertexBindingDivisorCount; j++)
        if (div->pVertexBindingDivisors[j].binding == b->binding)
          d = div->pVertexBindingDivisors[j].divisor;
      put_u32(w, 4, d);
    }
    msg_end(w, n);
  }
  for (uint32_t i = 0; i < vi->vertexAttributeDescriptionCount; i++) {
    const VkVertexInputAttributeDescription *a = &vi->pVertexAttributeDescriptions[i];
    size_t n = msg_begin(w, 2);
    put_u32(w, 1, a->location);
    put_u32(w, 2, a->binding);
    put_u32(w, 3, a->format);
    put_u32(w, 4, a->offset);
    msg_end(w, n);
  }
  msg_end(w, m);
  return 0;
}

int pcache__desc_put_rasterization(pcache__desc_writer *w,
                                   const VkPipelineRasterizationStateCreateInfo *rs, uint32_t dyn) {
  const VkPipelineRasterizationConservativeStateCreateInfoEXT *cons = NULL;
  const VkPipelineRasterizationStateStreamCreateInfoEXT *stream = NULL;
  const VkPipelineRasterizationLineStateCreateInfoEXT *line = NULL;
  const VkPipelineRasterizationDepthClipStateCreateInfoEXT *clip = NULL;
  const VkPipelineRasterizationProvokingVertexStateCreateInfoEXT *provoking = NULL;
  int bias;
  size_t m;
  for (const VkBaseInStructure *s = rs->pNext; s; s = s->pNext) {
    switch (s->sType) {
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_CONSERVATIVE_STATE_CREATE_INFO_EXT:
      cons = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_STREAM_CREATE_INFO_EXT:
      stream = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_LINE_STATE_CREATE_INFO_EXT:
      line = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT:
      clip = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_PROVOKING_VERTEX_STATE_CREATE_INFO_EXT:
      provoking = (const void *)s;
      break;
    default:
      return desc_unhashable(w, "pnext", (uint32_t)s->sType);
    }
  }
  bias = (dyn & DYN_DEPTH_BIAS_ENABLE) || rs->depthBiasEnable;
  m = msg_begin(w, 13);
  put_bool(w, 1, rs->depthClampEnable);
  if (!(dyn & DYN_RASTERIZER_DISCARD_ENABLE))
    put_bool(w, 2, rs->rasterizerDiscardEnable);
  put_u32(w, 3, rs->polygonMode);
  if (!(dyn & DYN_CULL_MODE))
    put_u32(w, 4, rs->cullMode);
  if (!(dyn & DYN_FRONT_FACE))
    put_u32(w, 5, rs->frontFace);
  if (!(dyn & DYN_DEPTH_BIAS_ENABLE))
    put_bool(w, 6, rs->depthBiasEnable);
  if (bias && !(dyn & DYN_DEPTH_BIAS)) {
    put_float(w, 7, rs->depthBiasConstantFactor);
    put_float(w, 8, rs->depthBiasClamp);
    put_float(w, 9, rs->depthBiasSlopeFactor);
  }
  if (!(dyn & DYN_LINE_WIDTH))
    put_float(w, 10, rs->lineWidth);
  if (cons) {
    put_u32(w, 11, cons->conservativeRasterizationMode);
    if (cons->conservativeRasterizationMode == VK_CONSERVATIVE_RASTERIZATION_MODE_OVERESTIMATE_EXT)
      put_float(w, 12, cons->extraPrimitiveOverestimationSize);
  }
  if (stream)
    put_u32(w, 13, stream->rasterizationStream);
  if (line) {
    put_u32(w, 14, line->lineRasterizationMode);
    put_bool(w, 15, line->stippledLineEnable);
    if (line->stippledLineEnable && !(dyn & DYN_LINE_STIPPLE)) {
      put_u32(w, 16, line->lineStippleFactor);
      put_u32(w, 17, line->lineStipplePattern);
    }
  }
  /* Without the struct depth clip follows !depthClampEnable; only a
   * departure from that is state. */
  if (clip && !clip->depthClipEnable != !rs->depthClampEnable)
    put_bool(w, 18, 1);
  if (provoking)
    put_u32(w, 19, provoking->provokingVertexMode);
  msg_end(w, m);
  return 0;
}

static void put_stencil(pcache__desc_writer *w, uint32_t field, const VkStencilOpState *s,
                        uint32_t dyn) {
  size_t m = msg_begin(w, field);
  if (!(dyn & DYN_STENCIL_OP)) {
    put_u32(w, 1, s->failOp);
    put_u32(w, 2, s->passOp);
    put_u32(w, 3, s->depthFailOp);
    put_u32(w, 4, s->compareOp);
  }
  if (!(dyn & DYN_STENCIL_COMPARE_MASK))
    put_u32(w, 5, s->compareMask);
  if (!(dyn & DYN_STENCIL_WRITE_MASK))
    put_u32(w, 6, s->writeMask);
  if (!(dyn & DYN_STENCIL_REFERENCE))
    put_u32(w, 7, s->reference);
  msg_end(w, m);
}

int pcache__desc_put_depth_stencil(pcache__desc_writer *w,
                                   const VkPipelineDepthStencilStateCreateInfo *ds, uint32_t dyn) {
  int depth = (dyn & DYN_DEPTH_TEST_ENABLE) || ds->depthTestEnable;
  int bounds = (dyn & DYN_DEPTH_BOUNDS_TEST_ENABLE) || ds->depthBoundsTestEnable;
  int stencil = (dyn & DYN_STENCIL_TEST_ENABLE) || ds->stencilTestEnable;
  size_t m;
  if (ds->pNext)
    return desc_unhashable(w, "pnext", pnext_stype(ds->pNext));
  m = msg_begin(w, 15);
  put_u32(w, 1, ds->flags);
  if (!(dyn & DYN_DEPTH_TEST_ENABLE))
    put_bool(w, 2, ds->depthTestEnable);
  if (depth && !(dyn & DYN_DEPTH_WRITE_ENABLE))
    put_bool(w, 3, ds->depthWriteEnable);
  if (depth && !(dyn & DYN_DEPTH_COMPARE_OP))
    put_u32(w, 4, ds->depthCompareOp);
  if (!(dyn & DYN_DEPTH_BOUNDS_TEST_ENABLE))
    put_bool(w, 5, ds->depthBoundsTestEnable);
  if (!(dyn & DYN_STENCIL_TEST_ENABLE))
    put_bool(w, 6, ds->stencilTestEnable);
  if (stencil) {
    put_stencil(w, 7, &ds->front, dyn);
    put_stencil(w, 8, &ds->back, dyn);
  }
  if (bounds && !(dyn & DYN_DEPTH_BOUNDS)) {
    put_float(w, 9, ds->minDepthBounds);
    put_float(w, 10, ds->maxDepthBounds);
  }
  msg_end(w, m);
  return 0;
}

int pcache__desc_put_color_blend(pcache__desc_writer *w,
                                 const VkPipelineColorBlendStateCreateInfo *cb, uint32_t dyn) {
  const VkPipelineColorWriteCreateInfoEXT *cw = NULL;
  size_t m;
  for (const VkBaseInStructure *s = cb->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_COLOR_WRITE_CREATE_INFO_EXT)
      return desc_unhashable(w, "pnext", (uint32_t)s->sType);
    cw = (const void *)s;
  }
  if (dyn & DYN_COLOR_WRITE_ENABLE)
    cw = NULL;
  if (cw && cw->attachmentCount != cb->attachmentCount)
    return desc_unhashable(w, "bad_color_write", 0);
  m = msg_begin(w, 16);
  put_u32(w, 1, cb->flags);
  put_bool(w, 2, cb->logicOpEnable);
  if (cb->logicOpEnable && !(dyn & DYN_LOGIC_OP))
    put_u32(w, 3, cb->logicOp);
  for (uint32_t i = 0; i < cb->attachmentCount; i++) {
    const VkPipelineColorBlendAttachmentState *a = &cb->pAttachments[i];
    size_t n = msg_begin(w, 4);
    put_bool(w, 1, a->blendEnable);
    if (a->blendEnable) {
      put_u32(w, 2, a->srcColorBlendFactor);
      put_u32(w, 3, a->dstColorBlendFactor);
      put_u32(w, 4, a->colorBlendOp);
      put_u32(w, 5, a->srcAlphaBlendFactor);
      put_u32(w, 6, a->dstAlphaBlendFactor);
      put_u32(w, 7, a->alphaBlendOp);
    }
    put_u32(w, 8, a->colorWriteMask);
    if (cw)
      put_bool(w, 9, !cw->pColorWriteEnables[i]);
    msg_end(w, n);
  }
  if (!(dyn & DYN_BLEND_CONSTANTS)) {
    size_t n = msg_begin(w, 5);
    for (int i = 0; i < 4; i++)
      raw_float(w, cb->blendConstants[i]);
    msg_end(w, n);
  }
  msg_end(w, m);
  return 0;
}

int pcache__desc_put_viewport(pcache__desc_writer *w, const VkPipelineViewportStateCreateInfo *vp,
                              uint32_t dyn) {
  const VkPipelineViewportDepthClipControlCreateInfoEXT *clip = NULL;
  size_t m;
  for (const VkBaseInStructure *s = vp->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_DEPTH_CLIP_CONTROL_CREATE_INFO_EXT)
      return desc_unhashable(w, "pnext", (uint32_t)s->sType);
    clip = (const void *)s;
  }
  m = msg_begin(w, 12);
  if (!(dyn & DYN_VIEWPORT_WITH_COUNT))
    put_u32(w, 1, vp->viewportCount);
  if (!(dyn & DYN_SCISSOR_WITH_COUNT))
    put_u32(w, 2, vp->scissorCount);
  if (!(dyn & (DYN_VIEWPORT | DYN_VIEWPORT_WITH_COUNT)) && vp->pViewports) {
    for (uint32_t i = 0; i < vp->viewportCount; i++) {
      const VkViewport *v = &vp->pViewports[i];
      size_t n = msg_begin(w, 3);
      put_float(w, 1, v->x);
      put_float(w, 2, v->y);
      put_float(w, 3, v->width);
      put_float(w, 4, v->height);
      put_float(w, 5, v->minDepth);
      put_float(w, 6, v->maxDepth);
      msg_end(w, n);
    }
  }
  if (!(dyn & (DYN_SCISSOR | DYN_SCISSOR_WITH_COUNT)) && vp->pScissors) {
    for (uint32_t i = 0; i < vp->scissorCount; i++) {
      const VkRect2D *s = &vp->pScissors[i];
      size_t n = msg_begin(w, 4);
      put_i32(w, 1, s->offset.x);
      put_i32(w, 2, s->offset.y);
      put_u32(w, 3, s->extent.width);
      put_u32(w, 4, s->extent.height);
      msg_end(w, n);
    }
  }
  if (clip)
    put_bool(w, 5, clip->negativeOneToOne);
  msg_end(w, m);
  return 0;
}

int pcache__desc_put_multisample(pcache__desc_writer *w,
                                 const VkPipelineMultisampleStateCreateInfo *ms) {
  size_t m;
  if (ms->pNext)
    return desc_unhashable(w, "pnext", pnext_stype(ms->pNext));
  m = msg_begin(w, 14);
  put_u32(w, 1, ms->rasterizationSamples);
  put_bool(w, 2, ms->sampleShadingEnable);
  if (ms->sampleShadingEnable)
    put_float(w, 3, ms->minSampleShading);
  if (ms->pSampleMask) {
    /* Only the bits of samples that exist; an all-ones mask is no mask. */
    uint32_t words[2], n = ms->rasterizationSamples > 32 ? 2 : 1, full = 1;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t bits = ms->rasterizationSamples >= 32 ? 32 : ms->rasterizationSamples;
      uint32_t valid = bits == 32 ? 0xffffffffu : (1u << bits) - 1;
      words[i] = ms->pSampleMask[i] & valid;
      full &= words[i] == valid;
    }
    if (!full)
      put_packed_u32(w, 4, words, n);
  }
  put_bool(w, 5, ms->alphaToCoverageEnable);
  put_bool(w, 6, ms->alphaToOneEnable);
  msg_end(w, m);
  return 0;
}

int pcache__desc_read_dynamic(pcache__desc_writer *w, const VkPipelineDynamicStateCreateInfo *d,
                              uint32_t list[PCACHE__DESC_MAX_DYNAMIC], uint32_t *ret_n,
                              uint32_t *ret_dyn) {
  uint32_t dyn = 0, n = 0;
  if (d->pNext || d->dynamicStateCount > PCACHE__DESC_MAX_DYNAMIC)
    return desc_unhashable(w, d->pNext ? "pnext" : "too_many_dynamic_states",
                           pnext_stype(d->pNext));
  for (uint32_t i = 0; i < d->dynamicStateCount; i++) {
    uint32_t v = d->pDynamicStates[i], j = n;
    dyn |= dyn_bit(d->pDynamicStates[i]);
    while (j > 0 && list[j - 1] > v) {
      list[j] = list[j - 1];
      j--;
    }
    if (j > 0 && list[j - 1] == v) { /* duplicate: undo the shift */
      memmove(&list[j], &list[j + 1], (n - j) * sizeof(*list));
      continue;
    }
    list[j] = v;
    n++;
  }
  *ret_n = n;
  *ret_dyn = dyn;
  return 0;
}

int pcache__desc_put_vertex_part(pcache__desc_writer *w, const VkGraphicsPipelineCreateInfo *info,
                                 uint32_t dyn) {
  const VkPipelineInputAssemblyStateCreateInfo *ia = info->pInputAssemblyState;
  size_t m;
  int r;
  if (info->pVertexInputState && !(dyn & DYN_VERTEX_INPUT)) {
    r = put_vertex_input(w, info->pVertexInputState, dyn);
    if (r < 0)
      return r;
  }
  if (!ia)
    return 0;
  if (ia->pNext)
    return desc_unhashable(w, "pnext", pnext_stype(ia->pNext));
  /* The topology stays even when dynamic: its class still matters. */
  m = msg_begin(w, 10);
  put_u32(w, 1, ia->topology);
  if (!(dyn & DYN_PRIMITIVE_RESTART_ENABLE))
    put_bool(w, 2, ia->primitiveRestartEnable);
  msg_end(w, m);
  return 0;
}

int pcache__desc_put_tessellation(pcache__desc_writer *w,
                                  const VkPipelineTessellationStateCreateInfo *ts, uint32_t dyn) {
  const VkPipelineTessellationDomainOriginStateCreateInfo *origin = NULL;
  size_t m;
  for (const VkBaseInStructure *s = ts->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_DOMAIN_ORIGIN_STATE_CREATE_INFO)
      return desc_unhashable(w, "pnext", (uint32_t)s->sType);
    origin = (const void *)s;
  }
  m = msg_begin(w, 11);
  if (!(dyn & DYN_PATCH_CONTROL_POINTS))
    put_u32(w, 1, ts->patchControlPoints);
  if (origin)
    put_u32(w, 2, origin->domainOrigin);
  msg_end(w, m);
  return 0;
}
