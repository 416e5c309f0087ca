/* A growable array, the one the tree uses wherever a list grows by
 * appending: a typed struct of items, count and capacity, grown by
 * doubling through one overflow-checked helper.
 *
 *   PCACHE_VEC(VkPipeline) owned = {0};
 *   if (pcache_vec_push(&owned, pipeline) < 0) ... -ENOMEM ...
 *   for (size_t i = 0; i < owned.n; i++) use(owned.items[i]);
 *   pcache_vec_free(&owned);
 *
 * Not thread-safe: callers lock as they would around any list. Memory
 * comes from pcache__realloc (the replaceable allocator). */
#ifndef PCACHE_COMMON_VEC_H
#define PCACHE_COMMON_VEC_H

#include <errno.h>
#include <stddef.h>

#define PCACHE_VEC(type)                                                                           \
  struct {                                                                                         \
    type *items;                                                                                   \
    size_t n, cap;                                                                                 \
  }

/*
 * pcache__vec_reserve - makes room for at least need items of elem_size
 * bytes in *items (capacity *cap), doubling from min_cap. Returns 0, or
 * -ENOMEM (out of memory, or the size would overflow), leaving the array as
 * it was.
 */
int pcache__vec_reserve(void **items, size_t *cap, size_t need, size_t elem_size, size_t min_cap);

/* Room for n more items. 0 or -ENOMEM. */
#define pcache_vec_reserve(v, more)                                                                \
  pcache__vec_reserve((void **)&(v)->items, &(v)->cap, (v)->n + (more), sizeof *(v)->items, 16)

/* Appends x. 0 or -ENOMEM (the array is unchanged). */
#define pcache_vec_push(v, x)                                                                      \
  (pcache_vec_reserve((v), 1) < 0 ? -ENOMEM : ((v)->items[(v)->n++] = (x), 0))

/* Frees the items; the vec is empty and usable again. */
#define pcache_vec_free(v) pcache__vec_free((void **)&(v)->items, &(v)->n, &(v)->cap)
void pcache__vec_free(void **items, size_t *n, size_t *cap);

#endif
