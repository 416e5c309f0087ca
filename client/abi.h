/* Growable public structs (pcache.h, "Growable structs"): the library
 * reads and writes only the bytes the caller's struct_size covers. */
#ifndef PCACHE_CLIENT_ABI_H
#define PCACHE_CLIENT_ABI_H

#include <errno.h>
#include <stddef.h>
#include <string.h>

/* The size of a struct's first version: up to and including its last
 * field of version 0.1. */
#define PCACHE__V1_SIZE(type, last_field)                                                          \
  (offsetof(type, last_field) + sizeof(((type *)0)->last_field))

/* The bytes of a caller's struct to use: its struct_size, 0 meaning the
 * first version. 0 when the size is impossible (smaller than that). */
static inline size_t pcache__struct_size(const void *s, size_t v1_size) {
  size_t n;
  memcpy(&n, s, sizeof n);
  if (n == 0)
    n = v1_size;
  return n < v1_size ? 0 : n;
}

/*
 * pcache__struct_in - copies the caller's src into dst, a zeroed struct of
 * this library's layout (dst_size bytes): fields past the caller's size
 * stay zero, fields the library does not know are ignored. src may be NULL
 * (all zero). Returns 0 or -EINVAL.
 */
static inline int pcache__struct_in(void *dst, size_t dst_size, const void *src, size_t v1_size) {
  size_t n;
  memset(dst, 0, dst_size);
  if (!src)
    return 0;
  n = pcache__struct_size(src, v1_size);
  if (!n)
    return -EINVAL;
  memcpy(dst, src, n < dst_size ? n : dst_size);
  return 0;
}

#endif
