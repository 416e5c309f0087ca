/* Eviction: snapshots first (derived data, rebuilt by the next run that
 * changes them), oldest stored first; then entries through the `lru`
 * index, whose oldest key is the first one, so evicting n entries costs n
 * deletes, whatever the store holds. */
#include <stdint.h>

#include <pcache/pcache.h>

#include "common/log.h"
#include "eviction.h"

static int evict(pcd_txn *txn, uint64_t max_bytes, uint64_t max_items, const uint8_t *keep_key,
                 const char *keep_app, uint64_t *ret_entries, uint64_t *ret_bytes) {
  uint64_t entries = 0, bytes = 0, items = 0;
  int r;
  for (; items < max_items; items++) {
    pcd_totals t;
    pcd_snapshot snap;
    uint8_t key[PCD_ENTRY_KEY_SIZE];
    uint64_t freed = 0;
    if ((r = pcd_totals_get(txn, &t)) < 0)
      return r;
    if (t.bytes + t.snapshot_bytes <= max_bytes)
      break;
    if (t.snapshots) {
      r = pcd_snapshot_oldest(txn, keep_key, keep_app, &snap);
      if (r < 0 && r != PCACHE_ENOT_FOUND)
        return r;
      if (r == 0) {
        if ((r = pcd_snapshot_delete(txn, snap.device_key, snap.app, &freed)) < 0)
          return r;
        log_info("evict: dropped the snapshot of app '%s' (%llu bytes)", snap.app,
                 (unsigned long long)freed);
        bytes += freed;
        continue;
      }
    }
    r = pcd_lru_oldest(txn, key);
    if (r == PCACHE_ENOT_FOUND)
      break;
    if (r < 0 || (r = pcd_entry_delete(txn, key, &freed)) < 0)
      return r;
    entries++;
    bytes += freed;
  }
  if (ret_entries)
    *ret_entries = entries;
  if (ret_bytes)
    *ret_bytes = bytes;
  return 0;
}

int pcd_evict_keep(pcd_txn *txn, uint64_t max_bytes, const uint8_t *keep_key, const char *keep_app,
                   uint64_t *ret_entries, uint64_t *ret_bytes) {
  return evict(txn, max_bytes, UINT64_MAX, keep_key, keep_app, ret_entries, ret_bytes);
}

int pcd_evict(pcd_txn *txn, uint64_t max_bytes, uint64_t *ret_entries, uint64_t *ret_bytes) {
  return evict(txn, max_bytes, UINT64_MAX, NULL, NULL, ret_entries, ret_bytes);
}

int pcd_evict_some(pcd_txn *txn, uint64_t max_bytes, uint64_t max_items, uint64_t *ret_entries,
                   uint64_t *ret_bytes) {
  return evict(txn, max_bytes, max_items, NULL, NULL, ret_entries, ret_bytes);
}

pcd_admission pcd_admission_start(uint64_t max_size, uint64_t reserved) {
  pcd_admission a = {max_size > reserved ? max_size - reserved : 0, 0};
  return a;
}

int pcd_admission_fits(const pcd_admission *a, uint64_t cost) {
  return a->taken <= a->room && cost <= a->room - a->taken;
}

void pcd_admission_take(pcd_admission *a, uint64_t cost) { a->taken += cost; }
