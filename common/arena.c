/* The bump allocator (arena.h): the caller's first buffer, then chunks of
 * at least 16 KiB, newest first, so only the newest has room to give. */
#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

#define CHUNK_SIZE 16384

struct pcache__arena_chunk {
  pcache__arena_chunk *next;
  size_t used, size;
  max_align_t data[];
};

pcache__arena pcache__arena_in(void *buf, size_t size) {
  return (pcache__arena){.first = buf, .first_size = size};
}

void *pcache__arena_alloc(pcache__arena *a, size_t size) {
  pcache__arena_chunk *c = a->head;
  /* Rounding up to 16 and the chunk header must not wrap. */
  if (size > SIZE_MAX / 2) {
    a->failed = 1;
    return NULL;
  }
  size = (size + 15) & ~(size_t)15;
  if (!c && a->first && a->first_size - a->first_used >= size) {
    void *p = a->first + a->first_used;
    a->first_used += size;
    memset(p, 0, size);
    return p;
  }
  if (!c || c->size - c->used < size) {
    size_t cap = size > CHUNK_SIZE ? size : CHUNK_SIZE;
    c = pcache__malloc(sizeof *c + cap);
    if (!c) {
      a->failed = 1;
      return NULL;
    }
    c->used = 0;
    c->size = cap;
    c->next = a->head;
    a->head = c;
  }
  void *p = (uint8_t *)c->data + c->used;
  c->used += size;
  memset(p, 0, size);
  return p;
}

void *pcache__arena_array(pcache__arena *a, size_t count, size_t size) {
  if (count == 0)
    return NULL;
  if (size && count > SIZE_MAX / 2 / size) {
    a->failed = 1;
    return NULL;
  }
  return pcache__arena_alloc(a, count * size);
}

void *pcache__arena_memdup(pcache__arena *a, const void *data, size_t size) {
  void *p = pcache__arena_alloc(a, size ? size : 1);
  if (p && size)
    memcpy(p, data, size);
  return p;
}

char *pcache__arena_strdup(pcache__arena *a, const char *s) {
  return pcache__arena_memdup(a, s, strlen(s) + 1);
}

char *pcache__arena_printf(pcache__arena *a, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return pcache__arena_strdup(a, buf);
}

void pcache__arena_free(pcache__arena *a) {
  pcache__arena_chunk *c = a->head;
  while (c) {
    pcache__arena_chunk *next = c->next;
    pcache__free(c);
    c = next;
  }
  a->head = NULL;
  a->failed = 0;
  a->first_used = 0;
}

void *pcache__arena_grow(pcache__arena *a, void *items, size_t n, size_t *cap, size_t elem_size) {
  void *p;
  if (n < *cap)
    return items;
  if (*cap > SIZE_MAX / 2 / (elem_size ? elem_size : 1)) {
    a->failed = 1;
    return NULL;
  }
  *cap = *cap ? *cap * 2 : 16;
  p = pcache__arena_alloc(a, *cap * elem_size);
  if (p && n)
    memcpy(p, items, n * elem_size);
  return p;
}
