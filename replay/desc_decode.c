/* The decoder: a stored PipelineDesc back into Vulkan create infos, and the
 * objects those name, so a pipeline can be rebuilt (replayed) on another
 * driver. It reads through protobuf-c (speed does not matter here) and
 * builds into an arena freed at once. What the canonical form left out
 * (layouts, load/store ops, ignored state) gets neutral values; describing
 * the result again gives the same bytes (tests/desc checks this).
 *
 * The bytes may come from anywhere (an import, a fuzzer): every index and
 * count that Vulkan would follow is checked before it is used.
 *
 * This file takes a description's parts in order; the decoders of the
 * parts are in the files desc_decode_internal.h lists, and the making of
 * the objects and the pipeline on a device in desc_create.c. */
#include "desc_decode_internal.h"

#include <errno.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/desc_check.h"
#include "proto/pcache.pb-c.h"

void pcache__desc_decoded_free(pcache__desc_decoded *decoded) {
  if (!decoded)
    return;
  pcache__desc_arena_free(decoded->arena);
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
  if ((r = pcache__desc_decode_layout(a, m->layout, d)) < 0 ||
      (r = pcache__desc_decode_stages(a, m, code, code_ctx, d)) < 0)
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
    r = pcache__desc_decode_render_pass(a, m->render_pass, &d->render_pass_info);
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
  return pcache__desc_decode_fixed_function(a, m, &d->graphics);
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
  /* Before protobuf-c, which would recurse into libraries without bound. */
  if (pcache__desc_check_nesting(desc, size) < 0) {
    r = PCACHE_EBAD_DESC;
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
