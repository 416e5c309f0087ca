/* The describer's graphics pipelines: which parts a create info carries,
 * which of their state counts (the subpass or rendering info, dynamic
 * state, rasterizer discard), and the description in order; the state
 * structs themselves are written by desc_state.c. */
#include "desc_internal.h"

#include <string.h>

#include <pcache/pcache.h>

/* ------------------------------------------------------------ reading back */

/* Whether a subpass has color and depth/stencil attachments, read back
 * from the render pass's encoding: the create info's pointers to that
 * state are to be ignored (and may be garbage) when it has none. */
static uint32_t ref_attachment(reader body) {
  uint32_t f;
  uint64_t v;
  reader sub;
  uint32_t att = 0;
  while (body.p < body.end && !rd_field(&body, &f, &v, &sub))
    if (f == 1)
      att = (uint32_t)v;
  return att;
}

static int subpass_usage(const pcache__desc_object *rp, uint32_t subpass, int *ret_color,
                         int *ret_depth) {
  reader r = {rp->encoded, rp->encoded + rp->encoded_size}, body, sub, ref;
  uint32_t f, index = 0;
  uint64_t v;
  while (r.p < r.end) {
    if (rd_field(&r, &f, &v, &body))
      return -1;
    if (f != 3 || index++ != subpass)
      continue;
    *ret_color = 0;
    *ret_depth = 0;
    while (body.p < body.end) {
      if (rd_field(&body, &f, &v, &sub))
        return -1;
      ref = sub;
      if (f == 4 && ref_attachment(ref) != VK_ATTACHMENT_UNUSED)
        *ret_color = 1;
      if (f == 6 && ref_attachment(ref) != VK_ATTACHMENT_UNUSED)
        *ret_depth = 1;
    }
    return 0;
  }
  return -1;
}

/* Fields 6-8, the global part: the render pass, or the rendering info of
 * which the shader parts use the view mask and the output part the
 * formats. No render pass and no VkPipelineRenderingCreateInfo means no
 * attachments: the same as an all-zero one. */
static void put_global(pcache__desc_writer *w, uint32_t parts, const pcache__desc_object *rp,
                       uint32_t subpass, const VkPipelineRenderingCreateInfo *rendering) {
  size_t m;
  if (rp) {
    put_object(w, 6, rp);
    put_u32(w, 7, subpass);
    return;
  }
  m = msg_begin(w, 8);
  if (rendering && (parts & (PART_PRE_RASTER | PART_FRAGMENT)))
    put_u32(w, 1, rendering->viewMask);
  if (rendering && (parts & PART_OUTPUT)) {
    put_packed_u32(w, 2, (const uint32_t *)rendering->pColorAttachmentFormats,
                   rendering->colorAttachmentCount);
    put_u32(w, 3, rendering->depthAttachmentFormat);
    put_u32(w, 4, rendering->stencilAttachmentFormat);
  }
  msg_end(w, m);
}

/*
 * A complete pipeline carries all four parts; a library (or a pipeline
 * linked from libraries) only some, and the state of the others is never
 * read: it may be garbage. Which state belongs to which part is the spec's
 * (docs/pipeline-desc.md has the table). What a library leaves to the
 * libraries linked with it (the stages that decide whether vertex input is
 * used, the rasterizer discard that decides whether fragment state is) is
 * read from their descriptions.
 */
int pcache__desc_graphics(const VkGraphicsPipelineCreateInfo *info,
                          const pcache__desc_lookup *lookup, pcache__desc_buf *buf,
                          pcache__desc_keys *ret_keys) {
  const VkPipelineRenderingCreateInfo *rendering = NULL;
  const VkPipelineRasterizationStateCreateInfo *rs = NULL;
  const pcache__desc_object *layout = NULL, *rp = NULL;
  uint32_t dyn = 0, stage_mask = 0, samples = 0, dyn_list[PCACHE__DESC_MAX_DYNAMIC], n_dyn = 0,
           parts;
  int has_color = 0, has_depth = 0, depth_known = 1, discard, r;
  size_t global_start, global_end;
  pcache__desc_writer w = {buf, 0};
  pcache__desc_gpl gpl;

  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext) {
    switch (s->sType) {
    case VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO:
      rendering = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO:
    case VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT: /* desc_library.c */
    case VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR:
      break;
    default:
      return desc_unhashable(&w, "pnext", (uint32_t)s->sType);
    }
  }
  if ((r = pcache__desc_gpl_scan(&w, info, lookup, &gpl)) < 0)
    return r;
  parts = gpl.parts;
  if (info->pDynamicState &&
      (r = pcache__desc_read_dynamic(&w, info->pDynamicState, dyn_list, &n_dyn, &dyn)) < 0)
    return r;
  /* The shader parts need a layout. A linked pipeline's own may stand in
   * for the union of its libraries' (and then must be known); a library
   * of other parts has none worth reading. */
  if ((parts & (PART_PRE_RASTER | PART_FRAGMENT)) ||
      (gpl.n_libraries && !(info->flags & VK_PIPELINE_CREATE_LIBRARY_BIT_KHR) &&
       info->layout != VK_NULL_HANDLE)) {
    layout = lookup->pipeline_layout ? lookup->pipeline_layout(lookup->ctx, info->layout) : NULL;
    if (!layout)
      return desc_unrecorded(&w, "unrecorded_pipeline_layout", VK_OBJECT_TYPE_PIPELINE_LAYOUT,
                             (uint64_t)info->layout);
  }
  if (!(parts & (PART_PRE_RASTER | PART_FRAGMENT | PART_OUTPUT))) {
    /* Vertex input alone: no render pass, no rendering info. */
  } else if (info->renderPass) {
    rp = lookup->render_pass ? lookup->render_pass(lookup->ctx, info->renderPass) : NULL;
    if (!rp || subpass_usage(rp, info->subpass, &has_color, &has_depth))
      return desc_unrecorded(&w, "unrecorded_render_pass", VK_OBJECT_TYPE_RENDER_PASS,
                             (uint64_t)info->renderPass);
  } else if (parts & PART_OUTPUT) {
    if (rendering) {
      has_color = rendering->colorAttachmentCount > 0;
      has_depth = rendering->depthAttachmentFormat != VK_FORMAT_UNDEFINED ||
                  rendering->stencilAttachmentFormat != VK_FORMAT_UNDEFINED;
    }
  } else {
    /* The formats are the output part's: a fragment shader library must
     * give its depth/stencil state whatever they turn out to be. */
    depth_known = 0;
  }
  if (parts & PART_PRE_RASTER) {
    rs = info->pRasterizationState;
    if (!rs)
      return desc_unhashable(&w, "no_rasterization_state", 0);
    discard = !(dyn & DYN_RASTERIZER_DISCARD_ENABLE) && rs->rasterizerDiscardEnable;
  } else {
    discard = gpl.discard;
  }

  buf->size = 0;
  put_u32(&w, 1, PCACHE_DESC_FORMAT_VERSION);
  put_u32(&w, 2, 1 /* ENTRY_KIND_GRAPHICS */);
  put_u32(&w, 3, info->flags & ~(uint32_t)IGNORED_PIPELINE_FLAGS);
  if (parts & (PART_PRE_RASTER | PART_FRAGMENT)) {
    r = pcache__desc_put_stages(&w, info->pStages, info->stageCount, lookup, &stage_mask);
    if (r < 0)
      return r;
    gpl.n_stages += info->stageCount;
  }
  if (gpl.n_stages > PCACHE_DESC_MAX_MODULES) /* the libraries' counted */
    return desc_unhashable(&w, "too_many_stages", 0);
  if (layout)
    put_object(&w, 5, layout);
  global_start = buf->size;
  if (parts & (PART_PRE_RASTER | PART_FRAGMENT | PART_OUTPUT))
    put_global(&w, parts, rp, info->subpass, rendering);
  global_end = buf->size;
  stage_mask |= gpl.stage_mask;
  if ((parts & PART_VERTEX_INPUT) && !(stage_mask & VK_SHADER_STAGE_MESH_BIT_EXT) &&
      (r = pcache__desc_put_vertex_part(&w, info, dyn)) < 0)
    return r;
  if ((parts & PART_PRE_RASTER) && (stage_mask & VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT) &&
      info->pTessellationState &&
      (r = pcache__desc_put_tessellation(&w, info->pTessellationState, dyn)) < 0)
    return r;
  if ((parts & PART_PRE_RASTER) && !discard && info->pViewportState &&
      (r = pcache__desc_put_viewport(&w, info->pViewportState, dyn)) < 0)
    return r;
  if (rs && (r = pcache__desc_put_rasterization(&w, rs, dyn)) < 0)
    return r;
  /* Multisample state belongs to the output part, and to the fragment
   * shader part when it has any (NULL or valid there). */
  if ((parts & (PART_FRAGMENT | PART_OUTPUT)) && !discard && info->pMultisampleState) {
    samples = info->pMultisampleState->rasterizationSamples;
    r = pcache__desc_put_multisample(&w, info->pMultisampleState);
    if (r < 0)
      return r;
  }
  if ((parts & PART_FRAGMENT) && !discard && (has_depth || !depth_known) &&
      info->pDepthStencilState &&
      (r = pcache__desc_put_depth_stencil(&w, info->pDepthStencilState, dyn)) < 0)
    return r;
  if ((parts & PART_OUTPUT) && !discard && has_color && info->pColorBlendState &&
      (r = pcache__desc_put_color_blend(&w, info->pColorBlendState, dyn)) < 0)
    return r;
  put_packed_u32(&w, 17, dyn_list, n_dyn);
  pcache__desc_put_gpl(&w, &gpl);
  if (w.err)
    return w.err;
  pcache__desc_finish_keys(&w, global_start, global_end, samples, ret_keys);
  return 0;
}
