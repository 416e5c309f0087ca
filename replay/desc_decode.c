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
 * This file takes a description's parts in order, and the libraries it
 * embeds (each a description of its own); the decoders of the parts are in
 * the files desc_decode.h lists, and the making of the objects and
 * the pipeline on a device in desc_create.c. */
#include "desc_decode.h"

#include <errno.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "desc_arena.h"
#include "desc_decode_graphics.h"
#include "desc_decode_objects.h"
#include "proto/desc_check.h"
#include "proto/pcache.pb-c.h"

/* The arena, the unpacked message and every allocation from them. a may
 * be NULL. */
static void desc_arena_free(struct pcache__desc_arena *a) {
  if (!a)
    return;
  if (a->msg)
    pcachepb__pipeline_desc__free_unpacked(a->msg, &pcache__pb_allocator);
  pcache__arena_free(&a->arena);
  pcache__free(a);
}

void pcache__desc_decoded_free(pcache__desc_decoded *decoded) {
  if (!decoded)
    return;
  desc_arena_free(decoded->arena);
  pcache__free(decoded);
}

static int decode_all(pcache__desc_decoded *d, const Pcachepb__PipelineDesc *m,
                      pcache__desc_code_fn code, void *code_ctx, int depth);

/* The parts and the libraries (each decoded like a description of its
 * own, into the same arena), chained onto the graphics create info. */
static int decode_libraries(pcache__desc_decoded *d, const Pcachepb__PipelineDesc *m,
                            pcache__desc_code_fn code, void *code_ctx, int depth) {
  struct pcache__desc_arena *a = d->arena;
  VkPipelineLibraryCreateInfoKHR *li;
  int r;
  d->library_parts = m->library_parts;
  if (m->library_parts) {
    VkGraphicsPipelineLibraryCreateInfoEXT *parts;
    ALLOC(a, parts, 1);
    parts->sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT;
    parts->pNext = (void *)d->graphics.pNext; /* the struct says void *, and is not written */
    parts->flags = m->library_parts;
    d->graphics.pNext = parts;
  }
  if (!m->n_libraries)
    return 0;
  /* pcache__desc_check_nesting bounded both before the unpacking. */
  if (m->n_libraries > PCACHE_DESC_MAX_LIBRARIES || depth == PCACHE_DESC_MAX_LIBRARY_DEPTH)
    return PCACHE_EBAD_DESC;
  ALLOC(a, li, 1);
  ALLOC(a, d->libraries, m->n_libraries);
  ALLOC(a, d->library_pipelines, m->n_libraries);
  d->n_libraries = (uint32_t)m->n_libraries;
  for (size_t i = 0; i < m->n_libraries; i++) {
    d->libraries[i].arena = a;
    if ((r = decode_all(&d->libraries[i], m->libraries[i], code, code_ctx, depth + 1)) < 0)
      return r;
    if (d->libraries[i].kind != 1)
      return PCACHE_EBAD_DESC;
  }
  li->sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR;
  li->pNext = d->graphics.pNext;
  li->libraryCount = d->n_libraries;
  li->pLibraries = d->library_pipelines;
  d->graphics.pNext = li;
  return 0;
}

/* One description (depth 0) or an embedded library (1, 2), into d, whose
 * arena is set. */
static int decode_all(pcache__desc_decoded *d, const Pcachepb__PipelineDesc *m,
                      pcache__desc_code_fn code, void *code_ctx, int depth) {
  struct pcache__desc_arena *a = d->arena;
  int gpl, r;
  if (m->format_version != PCACHE_DESC_FORMAT_VERSION)
    return PCACHE_EBAD_DESC;
  d->kind = (uint32_t)m->kind;
  if (d->kind != 1 && d->kind != 2)
    return PCACHE_EBAD_DESC;
  /* A library of parts without shaders has no layout to make; any other
   * pipeline gets one, empty if need be. */
  gpl = m->library_parts || m->n_libraries || (m->flags & VK_PIPELINE_CREATE_LIBRARY_BIT_KHR);
  d->has_layout = m->layout || d->kind == 2 || !gpl;
  if ((r = pcache__desc_decode_layout(a, m->layout, d)) < 0 ||
      (r = pcache__desc_decode_stages(a, m, code, code_ctx, d)) < 0)
    return r;
  if (d->kind == 2) {
    if (m->n_stages != 1 || gpl)
      return PCACHE_EBAD_DESC;
    d->compute = (VkComputePipelineCreateInfo){
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .flags = m->flags,
        .stage = d->stages[0],
        .basePipelineIndex = -1,
    };
    return 0;
  }
  d->graphics = (VkGraphicsPipelineCreateInfo){
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
      .flags = m->flags,
      .stageCount = (uint32_t)m->n_stages,
      .pStages = d->stages,
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
  if ((r = decode_libraries(d, m, code, code_ctx, depth)) < 0)
    return r;
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
  r = decode_all(d, d->arena->msg, code, code_ctx, 0);
  if (r < 0)
    goto out_free;
  *ret_decoded = d;
  return 0;
out_free:
  pcache__desc_decoded_free(d);
  return r;
}
