/* Pipelines the replayer has built and uploaded, kept alive a while
 * (keep.c).
 *
 * Why: NVIDIA's driver (580, measured in bench/RESULTS.md) shares what it
 * compiled for a shader stage among the live pipelines that use the same
 * stage, so a program that keeps its pipelines compiles each of a
 * material's specializations once, not once per pipeline. A replayer that
 * destroyed each pipeline as soon as its blob was read compiled every
 * stage of every pipeline from scratch, and fell behind the program that
 * first built them. Keeping the most recent ones gives the driver the
 * same chance, within a bound on their number and on the bytes of their
 * blobs (a measure of what the driver holds for them).
 *
 * Thread-safe: the replayer's threads share one keep. Vulkan lets a
 * pipeline outlive the modules, layouts and render pass it was made with
 * while no command buffer uses it, and the replayer records none. */
#ifndef PCACHE_REPLAY_KEEP_H
#define PCACHE_REPLAY_KEEP_H

#include <stddef.h>

#include <vulkan/vulkan.h>

typedef struct pcache__replay_keep pcache__replay_keep;

/* A keep for device of at most max_pipelines pipelines whose blobs take at
 * most max_bytes together. max_pipelines 0: none is kept (each is
 * destroyed as it is handed over). Returns 0 or -ENOMEM. */
int pcache__replay_keep_new(VkDevice device, unsigned max_pipelines, size_t max_bytes,
                            pcache__replay_keep **ret_keep);

/* Destroys every pipeline it holds. keep may be NULL. */
void pcache__replay_keep_free(pcache__replay_keep *keep);

/*
 * pcache__replay_keep_add - takes pipeline (whose blob was blob_size
 * bytes) over: kept, or destroyed at once when it alone is over the
 * bound. The oldest ones are destroyed to make room. keep may be NULL:
 * the pipeline is destroyed on device.
 */
void pcache__replay_keep_add(pcache__replay_keep *keep, VkDevice device, VkPipeline pipeline,
                             size_t blob_size);

/* Whether pipeline is kept now (the newest always is, unless it alone
 * was over the bound). */
int pcache__replay_keep_holds(pcache__replay_keep *keep, VkPipeline pipeline);

/* Pipelines kept now, and the most kept at once. */
void pcache__replay_keep_counts(pcache__replay_keep *keep, unsigned *ret_now, unsigned *ret_peak);

#endif
