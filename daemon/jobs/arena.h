/* A bump allocator for building one reply: every nested protobuf-c message
 * and array of a Response lives in the arena and goes with one free. */
#ifndef PCD_ARENA_H
#define PCD_ARENA_H

#include <stddef.h>

typedef struct pcd_arena_chunk pcd_arena_chunk;
typedef struct pcd_arena {
  pcd_arena_chunk *head;
  int failed; /* an allocation failed: the reply must become -ENOMEM */
  /* Optional: the caller's buffer, used before any chunk is allocated (a
   * small reply then takes nothing from malloc's arenas, which the I/O
   * threads share). 16-byte aligned; it must outlive the arena's use. */
  unsigned char *first;
  size_t first_size, first_used;
} pcd_arena;

/* An arena that starts in buf, size bytes aligned for max_align_t. */
pcd_arena pcd_arena_in(void *buf, size_t size);

/* Zeroed memory, or NULL (and a->failed set). */
void *pcd_arena_alloc(pcd_arena *a, size_t size);
void *pcd_arena_memdup(pcd_arena *a, const void *data, size_t size);
char *pcd_arena_strdup(pcd_arena *a, const char *s);
char *pcd_arena_printf(pcd_arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Room for one more element in an arena array of n elements of elem_size
 * bytes (*cap allocated): returns the array, moved to a doubled copy when
 * it was full, or NULL (and a->failed set). The old copy stays in the
 * arena until it is freed. */
void *pcd_arena_grow(pcd_arena *a, void *items, size_t n, size_t *cap, size_t elem_size);
void pcd_arena_free(pcd_arena *a);

#endif
