#include "pos_index.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"

static size_t slot_of(uint64_t h, size_t n_slots) {
  return (size_t)(h * 0x9e3779b97f4a7c15ull >> 32) & (n_slots - 1);
}

static void place(uint32_t *slots, size_t n_slots, uint64_t h, size_t pos) {
  size_t j = slot_of(h, n_slots);
  while (slots[j])
    j = (j + 1) & (n_slots - 1);
  slots[j] = (uint32_t)pos + 1;
}

long pcd_pos_index_find(const pcd_pos_index *ix, uint64_t h, pcd_pos_eq eq, const void *ctx) {
  if (!ix->n_slots)
    return -1;
  for (size_t j = slot_of(h, ix->n_slots); ix->slots[j]; j = (j + 1) & (ix->n_slots - 1))
    if (eq(ctx, ix->slots[j] - 1))
      return (long)(ix->slots[j] - 1);
  return -1;
}

int pcd_pos_index_add(pcd_pos_index *ix, uint64_t h, size_t pos, pcd_pos_hash hash_of,
                      const void *ctx) {
  if ((pos + 1) * 2 > ix->n_slots) {
    size_t n_slots = ix->n_slots ? ix->n_slots * 2 : 512;
    uint32_t *slots;
    if (pos >= UINT32_MAX - 1)
      return -ENOMEM;
    slots = pcache__calloc(n_slots, sizeof *slots);
    if (!slots)
      return -ENOMEM;
    for (size_t i = 0; i < pos; i++)
      place(slots, n_slots, hash_of(ctx, i), i);
    pcache__free(ix->slots);
    ix->slots = slots;
    ix->n_slots = n_slots;
  }
  place(ix->slots, ix->n_slots, h, pos);
  return 0;
}

void pcd_pos_index_free(pcd_pos_index *ix) {
  pcache__free(ix->slots);
  memset(ix, 0, sizeof *ix);
}
