/* The pipelines a device context owns (owned.c), with PCACHE_PIPELINES_
 * SHARED: which ones, and under which keys of which tables each is found,
 * so that releasing one can make every table forget it before it is
 * destroyed. The map is under its own lock; the tables keep their own locks
 * (taken after it). */
#ifndef PCACHE_CLIENT_OWNED_H
#define PCACHE_CLIENT_OWNED_H

#include "client/core.h"

typedef struct pcache__owned_entry pcache__owned_entry;
typedef struct pcache__owned {
  pcache__core *core;
  pthread_mutex_t lock; /* the map; the tables keep their own, taken after it */
  pcache__owned_entry **buckets;
  size_t n_buckets, count;
} pcache__owned;

int pcache__owned_init(pcache__owned *owned, pcache__core *core);

/* The context takes pipeline, and when table is not NULL, notes (as
 * pcache__owned_note does) that table is to map (k0, k1) to it: one lock
 * for both, before the caller completes that entry (nobody else holds the
 * handle yet, so nobody can release it in between). If the context
 * already owned that handle, the app destroyed the old pipeline itself and
 * the driver reused the value: the old one's table entries are forgotten
 * and reused_handles counts it. VK_SUCCESS, or
 * VK_ERROR_OUT_OF_HOST_MEMORY (then the caller destroys it). */
VkResult pcache__owned_add(pcache__owned *owned, VkPipeline pipeline, pcache__table *table,
                           uint64_t k0, uint64_t k1);

/* table now maps (k0, k1) to pipeline. A pipeline the context does not
 * own (released meanwhile) is left alone; without memory to note it, the
 * entry is removed again, so that no table outlives the pipeline. */
void pcache__owned_note(pcache__owned *owned, VkPipeline pipeline, pcache__table *table,
                        uint64_t k0, uint64_t k1);

/* Forgets pipeline everywhere and destroys it. 0 or PCACHE_ENOT_FOUND. */
int pcache__owned_release(pcache__owned *owned, VkPipeline pipeline);

/* The tables' entries that name old name new instead, and the context
 * owns new; old stays owned (found under no key now) until it is released
 * or the context destroyed, so command buffers recorded with it stay
 * valid. 0, PCACHE_ENOT_FOUND (old is not owned: released meanwhile; new
 * is left to the caller), or -ENOMEM (nothing changed). */
int pcache__owned_swap(pcache__owned *owned, VkPipeline old_pipeline, VkPipeline new_pipeline);

/* Destroys every pipeline still owned and frees the map (destroy). */
void pcache__owned_fini(pcache__owned *owned);

#endif
