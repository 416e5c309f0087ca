/* What a connection keeps between the pages of one Prefetch: the rest of
 * the page order, so that the next page goes on where the last one
 * stopped instead of collecting and sorting the (device, app) entries
 * again (read_blobs.c). A cursor holds state hashes only: read_blobs.c
 * reads each entry again when a page sends it, so an entry evicted,
 * purged or replaced since the order was made is seen as it is now. */
#ifndef PCD_PREFETCH_CURSOR_H
#define PCD_PREFETCH_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "store.h"

/* The most state hashes one cursor keeps: 256 KiB, so 64 MiB at the
 * default --max-connections if every client held one. The page that
 * reaches the end of a shortened order collects again. */
#define PCD_CURSOR_MAX_HASHES 16384
/* A cursor older than this is not gone on with (and the sweep frees it):
 * entries stored since it was made would be missed by this prefetch. */
#define PCD_CURSOR_MAX_AGE_US (10ull * 1000000u)

typedef struct pcd_prefetch_cursor {
  uint8_t device_key[PCACHE_DEVKEY_SIZE];
  char app[PCD_MAX_APP + 1];
  int snapshot;         /* Prefetch.snapshot of its pages */
  uint64_t next_offset; /* the offset the next page asks for */
  uint64_t made_us;     /* pcache__mono_us() when the order was collected */
  int complete;         /* the order ends with the last hash kept */
  size_t at, n;         /* hashes [at, n) are not handed out yet */
  uint8_t hashes[];     /* n × PCACHE_HASH_SIZE */
} pcd_prefetch_cursor;

/* A cursor for n hashes (the caller fills them, at = 0), or NULL when
 * there is no memory. */
pcd_prefetch_cursor *pcd_prefetch_cursor_new(const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                                             const char *app, int snapshot, size_t n,
                                             uint64_t now_us);
/* Whether the Prefetch page (device_key, app, snapshot, offset) goes on
 * where cursor stopped: the same prefetch, the offset its last page
 * handed out (never 0: a prefetch that starts over collects again, and
 * gets the snapshot), hashes left, and not too old. */
int pcd_prefetch_cursor_continues(const pcd_prefetch_cursor *cursor, const uint8_t *device_key,
                                  const char *app, int snapshot, uint64_t offset, uint64_t now_us);
/* Whether the sweep should free it. */
int pcd_prefetch_cursor_stale(const pcd_prefetch_cursor *cursor, uint64_t now_us);
void pcd_prefetch_cursor_free(pcd_prefetch_cursor *cursor);

#endif
