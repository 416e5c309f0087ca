/* What the decoder's files share (desc_decode.h is what its users see):
 * the arena a decoded description lives in, and the decoders of its
 * parts.
 *
 * The files, each calling only those listed after it:
 *   desc_decode.c           the entry point: a description's parts in order
 *   desc_decode_objects.c   samplers, set and pipeline layouts, render
 *                           passes, shader stages
 *   desc_decode_graphics.c  a graphics pipeline's fixed-function state
 *   desc_arena.c            the arena
 * desc_create.c, which makes the Vulkan objects, uses none of them. */
#ifndef PCACHE_REPLAY_DESC_DECODE_INTERNAL_H
#define PCACHE_REPLAY_DESC_DECODE_INTERNAL_H

#include <errno.h>
#include <stddef.h>

#include "proto/pcache.pb-c.h"
#include "replay/desc_decode.h"

/* Everything a decoded description points into (its libraries' included),
 * freed at once. */
struct pcache__desc_arena {
  struct pcache__desc_chunk *chunks;
  Pcachepb__PipelineDesc *msg;
};

/* count zeroed elements of size bytes, 16-byte aligned; NULL when count
 * is 0, and on overflow or failure. */
void *pcache__desc_arena_alloc(struct pcache__desc_arena *a, size_t count, size_t size);
/* Frees the arena, the unpacked message and every allocation from it. a
 * may be NULL. */
void pcache__desc_arena_free(struct pcache__desc_arena *a);

/* An allocation that failed only when count was nonzero. */
#define ALLOC(a, ptr, count)                                                                       \
  do {                                                                                             \
    (ptr) = pcache__desc_arena_alloc((a), (count), sizeof(*(ptr)));                                \
    if ((count) && !(ptr))                                                                         \
      return -ENOMEM;                                                                              \
  } while (0)

/* The decoders of the parts. Each returns 0, -ENOMEM or PCACHE_EBAD_DESC
 * (what the message holds is out of range), and what it makes lies in a. */

/* desc_decode_objects.c */
/* The pipeline layout (l may be NULL) with its set layouts and immutable
 * samplers, into d. */
int pcache__desc_decode_layout(struct pcache__desc_arena *a, const Pcachepb__PipelineLayoutDesc *l,
                               pcache__desc_decoded *d);
int pcache__desc_decode_render_pass(struct pcache__desc_arena *a,
                                    const Pcachepb__RenderPassDesc *rp,
                                    VkRenderPassCreateInfo2 *ret);
/* The stages into d->stages and their modules into d; code as for
 * pcache__desc_decode (what it returns is returned). */
int pcache__desc_decode_stages(struct pcache__desc_arena *a, const Pcachepb__PipelineDesc *m,
                               pcache__desc_code_fn code, void *code_ctx, pcache__desc_decoded *d);

/* desc_decode_graphics.c: the state structs of a graphics pipeline, into
 * g. */
int pcache__desc_decode_fixed_function(struct pcache__desc_arena *a,
                                       const Pcachepb__PipelineDesc *m,
                                       VkGraphicsPipelineCreateInfo *g);

#endif
