/* Eviction under --max-size (eviction.c). Each returns 0 or a
 * transaction-spoiling code. */
#ifndef PCD_EVICTION_H
#define PCD_EVICTION_H

#include <stdint.h>

#include "store.h"

/* Admission under --max-size, the one rule for how much a request may
 * store: what one Put, import or snapshot stores must fit under the cap
 * together, or the eviction that follows would drop what it has just
 * acknowledged. room: the cap less what the request reserves (the device
 * records it may make, PCD_DEVICE_COST_MAX each); taken: what it has
 * stored so far. */
typedef struct pcd_admission {
  uint64_t room, taken;
} pcd_admission;

pcd_admission pcd_admission_start(uint64_t max_size, uint64_t reserved);
/* Whether cost more fits. */
int pcd_admission_fits(const pcd_admission *a, uint64_t cost);
/* Counts cost as stored (only after fits said yes). */
void pcd_admission_take(pcd_admission *a, uint64_t cost);

/* Evicts until the store's entries and snapshots hold at most max_bytes:
 * snapshots first, oldest first (they duplicate entry data and the next
 * run rebuilds them), then least-recently-used entries. */
int pcd_evict(pcd_txn *txn, uint64_t max_bytes, uint64_t *ret_entries, uint64_t *ret_bytes);
/* The same, never evicting the snapshot of (keep_key, keep_app): the one a
 * PutSnapshot just stored. */
int pcd_evict_keep(pcd_txn *txn, uint64_t max_bytes, const uint8_t *keep_key, const char *keep_app,
                   uint64_t *ret_entries, uint64_t *ret_bytes);
/* The same, deleting at most max_items (snapshots and entries): a
 * transaction small enough for what is left of a full map. */
int pcd_evict_some(pcd_txn *txn, uint64_t max_bytes, uint64_t max_items, uint64_t *ret_entries,
                   uint64_t *ret_bytes);

#endif
