#include "arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

#define CHUNK_SIZE 16384

struct pcd_arena_chunk {
  pcd_arena_chunk *next;
  size_t used, size;
  max_align_t data[];
};

pcd_arena pcd_arena_in(void *buf, size_t size) {
  return (pcd_arena){.first = buf, .first_size = size};
}

void *pcd_arena_alloc(pcd_arena *a, size_t size) {
  pcd_arena_chunk *c = a->head;
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

void *pcd_arena_memdup(pcd_arena *a, const void *data, size_t size) {
  void *p = pcd_arena_alloc(a, size ? size : 1);
  if (p && size)
    memcpy(p, data, size);
  return p;
}

char *pcd_arena_strdup(pcd_arena *a, const char *s) {
  return pcd_arena_memdup(a, s, strlen(s) + 1);
}

char *pcd_arena_printf(pcd_arena *a, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return pcd_arena_strdup(a, buf);
}

void pcd_arena_free(pcd_arena *a) {
  pcd_arena_chunk *c = a->head;
  while (c) {
    pcd_arena_chunk *next = c->next;
    pcache__free(c);
    c = next;
  }
  a->head = NULL;
  a->failed = 0;
  a->first_used = 0;
}

void *pcd_arena_grow(pcd_arena *a, void *items, size_t n, size_t *cap, size_t elem_size) {
  void *p;
  if (n < *cap)
    return items;
  if (*cap > SIZE_MAX / 2 / (elem_size ? elem_size : 1)) {
    a->failed = 1;
    return NULL;
  }
  *cap = *cap ? *cap * 2 : 16;
  p = pcd_arena_alloc(a, *cap * elem_size);
  if (p && n)
    memcpy(p, items, n * elem_size);
  return p;
}
