/* The arena a decoded description lives in (desc_arena.c), which every
 * decoder file allocates from: below them all, so that none reaches up
 * into another for it. */
#ifndef PCACHE_REPLAY_DESC_ARENA_H
#define PCACHE_REPLAY_DESC_ARENA_H

#include <errno.h>
#include <stddef.h>

#include "proto/pcache.pb-c.h"

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

#endif
