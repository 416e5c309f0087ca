#include "alloc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>
#include <pcache/pcache.h>

static pcache_malloc_func alloc_malloc = malloc;
static pcache_realloc_func alloc_realloc = realloc;
static pcache_calloc_func alloc_calloc = calloc;
static pcache_free_func alloc_free = free;

PCACHE_API int pcache_replace_allocator(pcache_malloc_func malloc_func,
                                        pcache_realloc_func realloc_func,
                                        pcache_calloc_func calloc_func,
                                        pcache_free_func free_func) {
  if (!malloc_func || !realloc_func || !calloc_func || !free_func)
    return -EINVAL;
  alloc_malloc = malloc_func;
  alloc_realloc = realloc_func;
  alloc_calloc = calloc_func;
  alloc_free = free_func;
  return 0;
}

void *pcache__malloc(size_t size) { return alloc_malloc(size ? size : 1); }
void *pcache__calloc(size_t count, size_t size) {
  return alloc_calloc(count ? count : 1, size ? size : 1);
}
void *pcache__realloc(void *ptr, size_t size) { return alloc_realloc(ptr, size ? size : 1); }
void pcache__free(void *ptr) {
  if (ptr)
    alloc_free(ptr);
}

char *pcache__strdup(const char *s) {
  size_t n = strlen(s) + 1;
  char *copy = pcache__malloc(n);
  if (copy)
    memcpy(copy, s, n);
  return copy;
}

static void *pb_alloc(void *data, size_t size) {
  (void)data;
  return pcache__malloc(size);
}
static void pb_free(void *data, void *ptr) {
  (void)data;
  pcache__free(ptr);
}

ProtobufCAllocator pcache__pb_allocator = {pb_alloc, pb_free, NULL};
