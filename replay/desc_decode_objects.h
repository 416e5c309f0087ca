/* The decoder's objects (desc_decode_objects.c): what desc_decode.c calls
 * for a description's layouts, render pass and stages. Each returns 0,
 * -ENOMEM or PCACHE_EBAD_DESC (what the message holds is out of range),
 * and what it makes lies in a. */
#ifndef PCACHE_REPLAY_DESC_DECODE_OBJECTS_H
#define PCACHE_REPLAY_DESC_DECODE_OBJECTS_H

#include "proto/pcache.pb-c.h"
#include "replay/desc_arena.h"
#include "replay/desc_decoded.h"

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

#endif
