/* A replayer thread's shader modules, kept from one item to the next
 * (module_pool.c).
 *
 * The items of one app share most of their shaders: a material's variants
 * are one module specialized many ways, one vertex shader serves many
 * materials. Making each item's modules anew costs the driver its SPIR-V
 * front end every time, where the program that first compiled the same
 * pipelines paid it once per module; so a pool keeps them, keyed by the
 * code's XXH3-128 (what the description names: content, so equal keys are
 * equal code), bounded in number and code bytes, the least recently used
 * destroyed first. One pool per thread, used by that thread alone: no
 * lock. A module may be destroyed while pipelines made from it live on
 * (Vulkan allows it), so eviction never waits for anything. */
#ifndef PCACHE_REPLAY_MODULE_POOL_H
#define PCACHE_REPLAY_MODULE_POOL_H

#include <stddef.h>
#include <stdint.h>

#include <vulkan/vulkan.h>

#include "replay/desc_decode.h"

typedef struct pcache__module_pool pcache__module_pool;

/* A pool for device of at most max_modules modules and max_bytes of their
 * code together. Returns 0 or -ENOMEM. */
int pcache__module_pool_new(VkDevice device, unsigned max_modules, size_t max_bytes,
                            pcache__module_pool **ret_pool);
/* Destroys every module the pool holds. pool may be NULL. */
void pcache__module_pool_free(pcache__module_pool *pool);

/*
 * pcache__module_pool_lend - fills d's modules (its libraries' included)
 * from the pool, making the ones it lacks into it, and marks them lent
 * (pcache__desc_decoded.modules_lent), so pcache__desc_decoded_create_objects
 * makes only the rest. A module the pool cannot take (full of this item's
 * own, or over max_bytes alone) is left to create_objects. The lent
 * modules stay valid until the next lend: call it once per item, after
 * the previous item's pipeline exists. Returns 0, or -ENOMEM / -EIO (the
 * driver refused a module; nothing of d is lent then).
 */
int pcache__module_pool_lend(pcache__module_pool *pool, pcache__desc_decoded *d);

/* Modules made and lent so far (hits: lent - made). */
void pcache__module_pool_counts(const pcache__module_pool *pool, uint64_t *ret_made,
                                uint64_t *ret_lent);

#endif
