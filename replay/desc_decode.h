/* Pipeline descriptions decoded back into Vulkan objects (desc_decode*.c,
 * desc_create.c): for tests, fuzzers and the replayer, never inside
 * libpcache.so, which only ever describes.
 *
 * The decoder's files, each calling only those listed after it:
 *   desc_decode.c           the entry point: a description's parts in order
 *   desc_decode_objects.c   samplers, set and pipeline layouts, render
 *                           passes, shader stages
 *   desc_decode_graphics.c  a graphics pipeline's fixed-function state
 * and below them all desc_arena.h, the arena they allocate from
 * (common/arena.h's, beside the unpacked message), and desc_decoded.h,
 * the type they fill in. desc_create.c, which makes the Vulkan objects,
 * uses none of the decoder's files. */
#ifndef PCACHE_REPLAY_DESC_DECODE_H
#define PCACHE_REPLAY_DESC_DECODE_H

#include "replay/desc_decoded.h"

/*
 * pcache__desc_decode - parse desc (a packed PipelineDesc of this format
 * version) into create infos, and the libraries it embeds each into a
 * pcache__desc_decoded of its own. code may be NULL (the module infos then
 * have no code: enough to describe, not to create). Returns 0, -ENOMEM,
 * PCACHE_EBAD_DESC, or what code returned. Allocation is bounded by 16 KiB
 * plus a small multiple of size. Thread-safe. Free with
 * pcache__desc_decoded_free (the libraries go with it).
 */
int pcache__desc_decode(const uint8_t *desc, size_t size, pcache__desc_code_fn code, void *code_ctx,
                        pcache__desc_decoded **ret_decoded);
/* Copies the object handles into the pipeline create info (stage modules,
 * layout, render pass), its libraries' included. library_pipelines[] needs
 * no copying: the create info points at it. */
void pcache__desc_decoded_link(pcache__desc_decoded *decoded);
/* Creates every object on device (the libraries first, their objects and
 * their pipelines), then links. Returns 0, PCACHE_EMISSING_MODULE (decoded
 * without code), -ENOMEM or -EIO (the driver refused an object; what was
 * made is destroyed again). */
int pcache__desc_decoded_create_objects(pcache__desc_decoded *decoded, VkDevice device,
                                        const VkAllocationCallbacks *alloc);
/* Creates the pipeline itself (after create_objects). Returns 0, -ENOMEM
 * or -EIO (the driver refused it). */
int pcache__desc_decoded_create_pipeline(const pcache__desc_decoded *decoded, VkDevice device,
                                         VkPipelineCache cache, const VkAllocationCallbacks *alloc,
                                         VkPipeline *ret_pipeline);
/* Destroys the objects create_objects made (not the pipeline, which must
 * go first: it may link the library pipelines destroyed here). */
void pcache__desc_decoded_destroy_objects(pcache__desc_decoded *decoded, VkDevice device,
                                          const VkAllocationCallbacks *alloc);
void pcache__desc_decoded_free(pcache__desc_decoded *decoded);

#endif
