/* The arena a decoded description lives in: chunks of at least 16 KiB,
 * zeroed allocations, all freed at once with the unpacked message. */
#include "desc_arena.h"

#include <stdint.h>
#include <string.h>

#include "common/alloc.h"

struct pcache__desc_chunk {
  struct pcache__desc_chunk *next;
  size_t size, used;
  max_align_t data[];
};

void *pcache__desc_arena_alloc(struct pcache__desc_arena *a, size_t count, size_t size) {
  struct pcache__desc_chunk *c = a->chunks;
  size_t n;
  void *p;
  if (count == 0)
    return NULL;
  if (size && count > SIZE_MAX / 2 / size)
    return NULL;
  n = (count * size + 15) & ~(size_t)15;
  if (!c || c->size - c->used < n) {
    size_t cap = n > 16384 ? n : 16384;
    c = pcache__malloc(sizeof(*c) + cap);
    if (!c)
      return NULL;
    c->size = cap;
    c->used = 0;
    c->next = a->chunks;
    a->chunks = c;
  }
  p = (uint8_t *)c->data + c->used;
  c->used += n;
  memset(p, 0, n);
  return p;
}

void pcache__desc_arena_free(struct pcache__desc_arena *a) {
  struct pcache__desc_chunk *c, *next;
  if (!a)
    return;
  if (a->msg)
    pcachepb__pipeline_desc__free_unpacked(a->msg, &pcache__pb_allocator);
  for (c = a->chunks; c; c = next) {
    next = c->next;
    pcache__free(c);
  }
  pcache__free(a);
}
