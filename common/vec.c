#include "common/vec.h"

#include <stdint.h>

#include "common/alloc.h"

int pcache__vec_reserve(void **items, size_t *cap, size_t need, size_t elem_size, size_t min_cap) {
  size_t c = *cap ? *cap : min_cap;
  void *p;
  if (need <= *cap)
    return 0;
  while (c < need) {
    if (c > SIZE_MAX / 2)
      return -ENOMEM;
    c *= 2;
  }
  if (elem_size && c > SIZE_MAX / elem_size)
    return -ENOMEM;
  p = pcache__realloc(*items, c * elem_size);
  if (!p)
    return -ENOMEM;
  *items = p;
  *cap = c;
  return 0;
}

void pcache__vec_free(void **items, size_t *n, size_t *cap) {
  pcache__free(*items);
  *items = NULL;
  *n = 0;
  *cap = 0;
}
