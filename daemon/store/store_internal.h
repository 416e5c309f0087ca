/* What the store's files share (store.h is what the rest of the daemon
 * sees). Only daemon/store*.c include this, and with it lmdb.h.
 *
 * LMDB layout (docs/storage.md has the full description):
 *   info     "format" u32, "created" u64 (unix s), "bytes" u64 (blob+desc)
 *   devices  devkey(32) -> v1 record: first/last seen, entries, bytes, DeviceInfo
 *   entries  entry key(48) -> v1 metadata (64 bytes) + app name
 *   blobs    entry key -> blob bytes
 *   descs    entry key -> canonical PipelineDesc bytes
 *   modules  SPIR-V hash(16) -> refcount u32 + code
 *   lru      last_used_us u64 BE ‖ entry key -> empty
 *   apps     devkey ‖ app ‖ 0 ‖ state hash -> empty
 *   snapshots devkey ‖ app -> v1 snapshot metadata (48 bytes)
 *   snapdata  devkey ‖ app -> state hashes (16 bytes each) ‖ blob
 * info also holds "snap_bytes" u64 (hash list + blob bytes of snapshots)
 * and the counters of store_counters.c.
 * Integers are little-endian except the lru prefix, which is big-endian so
 * LMDB's byte order is time order.
 *
 * The files, each calling only those listed after it:
 *   store_entries.c    entries, blobs, descs and their lru and apps indexes
 *   store_snapshots.c  snapshots, snapdata
 *   store_modules.c    modules and their reference counts
 *   store_devices.c    device records
 *   store_counters.c   the size counters in info, totals, recounts
 *   store.c            the environment (open, check, close), transactions
 *   store_db.c         get, put, del and prefix scans, LMDB's errors
 *   store_check.c      the checks (store_check.h) */
#ifndef PCD_STORE_INTERNAL_H
#define PCD_STORE_INTERNAL_H

#include <lmdb.h>
#include <stdatomic.h>
#include <stdint.h>

#include "store.h"

#define PCD_SPARE_TXNS 16
#define PCD_APP_GEN_BUCKETS 4096

struct pcd_store {
  MDB_env *env;
  /* Reset read transactions kept for the next read: renewing one skips
   * the reader-table lock and the allocations of a fresh one, on every
   * Get. One slot per reading thread (spare_slot), so that the I/O
   * threads do not take each other's; MDB_NOTLS lets any thread renew
   * any of them, so a shared slot is only slower, never wrong. */
  _Atomic(pcd_txn *) spare[PCD_SPARE_TXNS];
  MDB_dbi info, devices, entries, blobs, descs, modules, lru, apps, snapshots, snapdata;
  uint64_t map_size;
  int lock_fd; /* pcached.lock, flocked while the store is open */
  char dir[4096];
  /* Change counters of (device, app) pairs, by a hash of the pair (a
   * collision only costs a needless rebuild), bumped after each commit
   * that changed the pair's entries or snapshot; all_changes after one
   * that changed too many to list. pcd_store_app_gen reads them. */
  atomic_uint_fast64_t app_gens[PCD_APP_GEN_BUCKETS];
  atomic_uint_fast64_t all_changes;
};

/* The most (device, app) pairs a write transaction lists as changed; more
 * count as a change of all of them. */
#define PCD_TXN_CHANGES 16

struct pcd_txn {
  pcd_store *store;
  MDB_txn *txn;
  int err;
  int write;
  uint16_t changed[PCD_TXN_CHANGES]; /* app_gens buckets to bump at commit */
  uint8_t n_changed, changed_all;
};

/* Notes that the txn changes (devkey, app)'s entries or snapshot (app
 * NULL: it cannot say which app): bumped at commit, forgotten at abort. */
void pcd_txn_note_change(pcd_txn *t, const uint8_t *devkey, const char *app);

/* ------------------------------------------------------------ store_db.c */

/* An LMDB return code as 0 or PCACHE_E*: MDB_NOTFOUND is
 * PCACHE_ENOT_FOUND; a full map (PCACHE_EFULL) or any other failure
 * (PCACHE_ESTORE, logged with what) also spoils t (may be NULL). */
int pcd_db_err(pcd_txn *t, int rc, const char *what);
/* One value of dbi; v points into the store until the txn ends. */
int pcd_db_get(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, MDB_val *v,
               const char *what);
/* Put and delete check the value they replace or remove before LMDB frees
 * it (store_check.h); a missing key is not an error for del. */
int pcd_db_put(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, const void *val,
               size_t val_size, const char *what);
int pcd_db_del(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, const char *what);
/* Walks dbi from the first key >= prefix while keys start with prefix
 * (every key when prefix_len is 0). A callback returning nonzero stops
 * the walk with that value. */
typedef int (*pcd_db_kv_cb)(void *ctx, const MDB_val *k, const MDB_val *v);
int pcd_db_scan(pcd_txn *t, MDB_dbi dbi, const void *prefix, size_t prefix_len, pcd_db_kv_cb cb,
                void *ctx);

/* ------------------------------------------------------ store_counters.c */

/* Adds delta to the u64 counter name in `info` (never below 0). */
int pcd_counter_add(pcd_txn *t, const char *name, int64_t delta);

/* ------------------------------------------------------- store_devices.c */

/* Adds to a device record's entry and byte counts, and drops the record
 * when no entry and no snapshot is left of it. */
int pcd_device_add(pcd_txn *t, const uint8_t *devkey, int64_t entries, int64_t bytes);

/* ------------------------------------------------------- store_modules.c */

/* Drops one reference to a module, and the module with its last. */
int pcd_module_unref(pcd_txn *t, const pcache__hash *hash);

#endif
