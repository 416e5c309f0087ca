/* The decoder's graphics state (desc_decode_graphics.c): what
 * desc_decode.c calls for a graphics pipeline's fixed-function state. It
 * returns 0, -ENOMEM or PCACHE_EBAD_DESC (what the message holds is out
 * of range), and what it makes lies in a. */
#ifndef PCACHE_REPLAY_DESC_DECODE_GRAPHICS_H
#define PCACHE_REPLAY_DESC_DECODE_GRAPHICS_H

#include <vulkan/vulkan.h>

#include "proto/pcache.pb-c.h"
#include "replay/desc_arena.h"

/* The state structs of a graphics pipeline, into g. */
int pcache__desc_decode_fixed_function(struct pcache__desc_arena *a,
                                       const Pcachepb__PipelineDesc *m,
                                       VkGraphicsPipelineCreateInfo *g);

#endif
