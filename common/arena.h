/* A bump allocator: many small zeroed allocations that go with one free.
 * The daemon builds each reply in one (every nested protobuf-c message and
 * array of a Response), and the replayer's decoder a decoded description
 * (replay/desc_arena.h), so neither frees piece by piece.
 *
 * Allocations are 16-byte aligned. A failed allocation returns NULL and
 * sets failed, so a builder can go on and check once at the end. Not
 * thread-safe: one arena, one thread at a time. Memory comes from
 * pcache__malloc (the replaceable allocator). */
#ifndef PCACHE_COMMON_ARENA_H
#define PCACHE_COMMON_ARENA_H

#include <stddef.h>

typedef struct pcache__arena_chunk pcache__arena_chunk;
typedef struct pcache__arena {
  pcache__arena_chunk *head;
  int failed; /* an allocation failed: the daemon's reply must become -ENOMEM */
  /* Optional: the caller's buffer, used before any chunk is allocated (a
   * small reply then takes nothing from malloc's arenas, which the
   * daemon's I/O threads share). 16-byte aligned; it must outlive the
   * arena's use. */
  unsigned char *first;
  size_t first_size, first_used;
} pcache__arena;

/* An arena that starts in buf, size bytes aligned for max_align_t. An
 * arena of {0} starts with no buffer of its own. */
pcache__arena pcache__arena_in(void *buf, size_t size);

/* Zeroed memory, or NULL (and a->failed set). */
void *pcache__arena_alloc(pcache__arena *a, size_t size);
/* count zeroed elements of size bytes: NULL when count is 0 (not a
 * failure), and on overflow or failure (a->failed set). For counts read
 * from untrusted bytes. */
void *pcache__arena_array(pcache__arena *a, size_t count, size_t size);
void *pcache__arena_memdup(pcache__arena *a, const void *data, size_t size);
char *pcache__arena_strdup(pcache__arena *a, const char *s);
/* At most 511 bytes of text: longer is cut. */
char *pcache__arena_printf(pcache__arena *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Room for one more element in an arena array of n elements of elem_size
 * bytes (*cap allocated): returns the array, moved to a doubled copy when
 * it was full, or NULL (and a->failed set). The old copy stays in the
 * arena until it is freed. */
void *pcache__arena_grow(pcache__arena *a, void *items, size_t n, size_t *cap, size_t elem_size);
/* Frees every chunk; the arena may be used again (its first buffer too). */
void pcache__arena_free(pcache__arena *a);

#endif
