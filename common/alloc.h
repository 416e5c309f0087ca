/* The library's own allocations go through these, so an app can replace
 * them (pcache_replace_allocator). Programs use them too, for one habit. */
#ifndef PCACHE_COMMON_ALLOC_H
#define PCACHE_COMMON_ALLOC_H

#include <stddef.h>

void *pcache__malloc(size_t size);
void *pcache__calloc(size_t count, size_t size);
void *pcache__realloc(void *ptr, size_t size);
void pcache__free(void *ptr);
char *pcache__strdup(const char *s);

/* The protobuf-c allocator that routes through the functions above. */
struct ProtobufCAllocator;
extern struct ProtobufCAllocator pcache__pb_allocator;

#endif
