/* An open-addressed index over an append-only array: slot -> position + 1.
 * The array's owner supplies the hashes and the equality test, so one
 * index serves any element type (pending touches, imported modules). */
#ifndef PCD_POS_INDEX_H
#define PCD_POS_INDEX_H

#include <stddef.h>
#include <stdint.h>

typedef struct pcd_pos_index {
  uint32_t *slots; /* position + 1, 0 empty */
  size_t n_slots;  /* a power of two, at least twice the positions */
} pcd_pos_index;

typedef int (*pcd_pos_eq)(const void *ctx, size_t pos);
typedef uint64_t (*pcd_pos_hash)(const void *ctx, size_t pos);

/* The position whose element has hash h and satisfies eq, or -1. */
long pcd_pos_index_find(const pcd_pos_index *ix, uint64_t h, pcd_pos_eq eq, const void *ctx);
/* Adds pos (positions 0 .. pos-1 are in already) under hash h, growing
 * the table (rehashing them through hash_of) when it would be half full.
 * Returns 0 or -ENOMEM (the index is unchanged). */
int pcd_pos_index_add(pcd_pos_index *ix, uint64_t h, size_t pos, pcd_pos_hash hash_of,
                      const void *ctx);
void pcd_pos_index_free(pcd_pos_index *ix);

#endif
