/* Building one shared-memory segment (segment_build.c): what the
 * registry (segment.c) calls to plan a segment of (device, app) in a read
 * transaction and to write it, sealed, into a memfd. */
#ifndef PCD_SEGMENT_BUILD_H
#define PCD_SEGMENT_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store.h"

/* What a segment will hold. The blobs and the snapshot point into the
 * read transaction's map: the plan lives no longer than it. */
typedef struct pcd_seg_plan {
  uint8_t *bad_keys; /* blobs that failed their checksum, n_bad keys */
  size_t n_bad;
  struct seg_item *items;
  size_t n, n_uncovered;
  uint8_t *snap_hashes; /* the snapshot's hashes that have entries, n_snap × 16 */
  uint32_t n_snap;
  const uint8_t *snapshot;
  uint64_t snapshot_size, snapshot_checksum;
  int complete;
} pcd_seg_plan;

/* What the segment holds, in data order: the blobs the snapshot does not
 * cover (what a Prefetch sends), then those it does (what a client that
 * does not load the snapshot fetches per miss), each in the app's order,
 * while they fit under cap with the snapshot and the tables. Blobs that
 * fail their checksum are left out, their keys in bad_keys. 0 or a
 * negative code; free the plan with pcd_segment_plan_free either way. */
int pcd_segment_plan(pcd_txn *txn, const pcd_config *cfg, const uint8_t *devkey, const char *app,
                     uint64_t cap, pcd_seg_plan *p);
void pcd_segment_plan_free(pcd_seg_plan *p);

/* Lays the plan out as segment generation of devkey, and writes the
 * tables, the snapshot and the blobs into a new memfd, sealed: *ret_fd
 * (the caller's) and its size *ret_size. 0 or a negative code. */
int pcd_segment_write(pcd_seg_plan *p, const uint8_t *devkey, uint64_t generation, int *ret_fd,
                      uint64_t *ret_size);

#endif
