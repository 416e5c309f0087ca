/* Misses without a stall (fastlink.c, the parts in fastlink_parts.c): a
 * complete graphics pipeline that nobody has, built from its four
 * VK_EXT_graphics_pipeline_library parts (vertex input, pre-rasterization
 * shaders, fragment shader, fragment output), each found in the context
 * by its part hash or built as a library (through build.c, so it is
 * fetched, compiled and uploaded under that hash like any pipeline); then
 * fast-linked and returned, while the optimized pipeline (the same
 * libraries linked with link-time optimization) is compiled on a small
 * pool of threads, at most so many a frame, and swapped into the tiers at
 * pcache_device_end_frame (owned.c moves the table entries). libpcache
 * only: the layer never asks for it.
 *
 * Lock order: the pool's lock is never held while calling the driver,
 * build.c or owned.c. */
#ifndef PCACHE_CLIENT_FASTLINK_H
#define PCACHE_CLIENT_FASTLINK_H

#include "client/build.h"

typedef struct pcache__fastlink_job pcache__fastlink_job;

/* Sets device->fastlink when info asks for a fast-link mode and the device
 * supports it (the graphicsPipelineLibrary feature, and fast linking for
 * PCACHE_FAST_LINK_THEN_OPTIMIZE), starting the pool's threads. Leaves it
 * NULL otherwise (said in the log when the app asked): misses then compile
 * as before. Never fails. */
void pcache__fastlink_start(pcache_device *device, const pcache_device_info *info,
                            PFN_vkGetInstanceProcAddr gipa);

/* 1 when build (a hashable create info) goes through
 * pcache__fastlink_build: a complete graphics pipeline with no create
 * flags, none of the pNext structs a split would break (flags2, creation
 * feedback), no mesh stages and no static rasterizer discard. */
int pcache__fastlink_applies(const pcache_device *device, const pcache__build *build);

/*
 * pcache__fastlink_build - the pipeline for build, whose description and
 * keys the caller made (as pcache__build_hashed takes them): the optimized
 * pipeline when the device cache holds it (built here, or the daemon's
 * blob), else per the mode: linked with link-time optimization now (WAIT),
 * or fast-linked, with *ret_job the optimization to hand to
 * pcache__fastlink_submit once the caller owns the pipeline
 * (THEN_OPTIMIZE; NULL when none is needed or memory ran out). Returns the
 * driver's VkResult; *ret_job is NULL unless VK_SUCCESS.
 */
VkResult pcache__fastlink_build(pcache_device *device, const pcache__build *build,
                                const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                                VkPipeline *ret_pipeline, pcache__fastlink_job **ret_job);

/*
 * pcache__fastlink_prepare - the four parts of build's pipeline (for which
 * pcache__fastlink_applies), found in the context or built, and nothing
 * linked (pcache_prepare_graphics_pipeline). Returns VK_SUCCESS,
 * VK_ERROR_FEATURE_NOT_PRESENT when a part cannot be described (nothing
 * built), or the driver's VkResult for a part.
 */
VkResult pcache__fastlink_prepare(pcache_device *device, const pcache__build *build);

/* Queues job, whose result replaces linked (the fast-linked pipeline the
 * caller now owns; VK_NULL_HANDLE: drop the job) at an end of frame. A job
 * for a state hash already queued or compiling is dropped. */
void pcache__fastlink_submit(pcache_device *device, pcache__fastlink_job *job, VkPipeline linked);

/* Swaps the optimized pipelines finished since the last call in, and
 * gives the pool a new frame's budget. From pcache_device_end_frame. */
void pcache__fastlink_end_frame(pcache_device *device);

/* Waits until the pool has nothing it may start this frame and nothing
 * compiling (pcache_device_flush). */
void pcache__fastlink_wait(pcache_device *device);

/* The app destroys layout: queued jobs that link with it are dropped (their
 * fast-linked pipelines stay), and a compile using it is waited for. */
void pcache__fastlink_forget_layout(pcache_device *device, VkPipelineLayout layout);

/* Stops the pool, destroys what it owns (libraries, optimized pipelines
 * not swapped in) and sets device->fastlink to NULL. */
void pcache__fastlink_stop(pcache_device *device);

#endif
