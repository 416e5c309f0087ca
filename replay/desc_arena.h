/* The arena a decoded description lives in, which every decoder file
 * allocates from: below them all, so that none reaches up into another
 * for it. The allocator is the tree's one (common/arena.h); this adds the
 * unpacked message the decoded description points into, freed with it
 * (pcache__desc_decoded_free, desc_decode.c). */
#ifndef PCACHE_REPLAY_DESC_ARENA_H
#define PCACHE_REPLAY_DESC_ARENA_H

#include <errno.h>
#include <stddef.h>

#include "common/arena.h"
#include "proto/pcache.pb-c.h"

/* Everything a decoded description points into (its libraries' included),
 * freed at once. */
struct pcache__desc_arena {
  pcache__arena arena;
  Pcachepb__PipelineDesc *msg;
};

/* count zeroed elements of ptr's type (pcache__arena_array: NULL when
 * count is 0); -ENOMEM from the calling function when an allocation of a
 * nonzero count failed. */
#define ALLOC(a, ptr, count)                                                                       \
  do {                                                                                             \
    (ptr) = pcache__arena_array(&(a)->arena, (count), sizeof(*(ptr)));                             \
    if ((count) && !(ptr))                                                                         \
      return -ENOMEM;                                                                              \
  } while (0)

#endif
