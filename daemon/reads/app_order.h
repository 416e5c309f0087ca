/* An app's entries in the order a Prefetch sends them and a segment lays
 * them out (app_order.c): most recently used first, cut to those the app
 * is likely to use (--prefetch-window, --prefetch-max). Shared by
 * read_blobs.c and segment_build.c so that both agree on what an app
 * needs. */
#ifndef PCD_APP_ORDER_H
#define PCD_APP_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "common/vec.h"
#include "config.h"
#include "store.h"

/* What an order needs of an entry: a Prefetch keeps thousands of these
 * while it sorts, so not the whole pcd_entry (its app name alone is 201
 * bytes). */
typedef struct pcd_order_ref {
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  uint32_t kind;
  uint64_t blob_size, checksum, last_used_us;
} pcd_order_ref;

typedef PCACHE_VEC(pcd_order_ref) pcd_order_vec;

void pcd_order_ref_of(const pcd_entry *e, pcd_order_ref *ret_ref);

/* Appends the entries filed under app on devkey to ev, and sets
 * *ret_newest_us to the latest use of any of them. 0 or a negative code. */
int pcd_order_collect(pcd_txn *txn, const uint8_t *devkey, const char *app, pcd_order_vec *ev,
                      uint64_t *ret_newest_us);

/* Most recently used first; ties (a Put stores its items with one time)
 * by key, so that the order is the same for every page of a paged
 * Prefetch. */
void pcd_order_sort(pcd_order_vec *ev);

/* How many of a sorted order the app is likely to use: those used within
 * --prefetch-window of its latest use (relative, so an app not run for a
 * month still gets what its last runs used), at most --prefetch-max. The
 * rest stays in the store, served per miss by a Get, which touches it and
 * so brings it back into the window. */
size_t pcd_order_likely(const pcd_order_vec *ev, uint64_t newest_us, const pcd_config *cfg);

#endif
