/* bench_gpl's third measure, what a draw costs on the GPU
 * (bench_gpl_draw.c). */
#ifndef PCACHE_BENCH_GPL_DRAW_H
#define PCACHE_BENCH_GPL_DRAW_H

#include "bench_gpl_common.h"

/* Draws of a grid with linked, then optimized, between timestamps; prints
 * gpl_draw_* lines. */
void draw_bench(const vk_t *v, VkDevice device, const objects *o, VkPipeline linked,
                VkPipeline optimized, uint32_t draws);

#endif
