/* The store's replay records (store_replay.c, docs/replay.md): one
 * progress record per (old key -> new key) replay and one record per
 * pipeline that could not be replayed, both in the `info` database, and
 * the two walks the replay's order needs (an app's entries from a
 * cursor, the LRU index newest first); store_replay.c also keeps the
 * program name each app runs as (store.h). Everything else a replay needs to
 * resume is the store itself: an item is done when the new key has its
 * entry. */
#ifndef PCD_STORE_REPLAY_H
#define PCD_STORE_REPLAY_H

#include <stdint.h>

#include "store.h"

/* An LRU index key: big-endian last use ‖ entry key. */
#define PCD_LRU_KEY_SIZE (8 + PCD_ENTRY_KEY_SIZE)
/* Longest reason a bad-pipeline record keeps. */
#define PCD_REPLAY_REASON_MAX 200

enum { PCD_REPLAY_PENDING = 0, PCD_REPLAY_FINISHED = 1 };

typedef struct pcd_replay_record {
  uint8_t old_key[PCACHE_DEVKEY_SIZE], new_key[PCACHE_DEVKEY_SIZE];
  uint32_t state; /* PCD_REPLAY_PENDING or _FINISHED */
  uint64_t created_us, finished_us;
  uint64_t total, done, failed; /* as counted when it finished */
} pcd_replay_record;

/* Write txn. Stores (replacing) the record of (old_key, new_key). */
int pcd_replay_record_put(pcd_txn *txn, const pcd_replay_record *rec);
/* 0, PCACHE_ENOT_FOUND or PCACHE_ESTORE. */
int pcd_replay_record_get(pcd_txn *txn, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                          const uint8_t new_key[PCACHE_DEVKEY_SIZE], pcd_replay_record *ret_rec);
typedef int (*pcd_replay_record_cb)(void *ctx, const pcd_replay_record *rec);
/* Every record, ordered by (old key, new key). A record that does not
 * decode is skipped (it is rebuilt when the replay is found again). */
int pcd_replay_records_foreach(pcd_txn *txn, pcd_replay_record_cb cb, void *ctx);
/* Write txn: removes the record and its bad-pipeline records. */
int pcd_replay_record_delete(pcd_txn *txn, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                             const uint8_t new_key[PCACHE_DEVKEY_SIZE]);

/* Write txn: records state_hash of the replay as bad, with reason (cut to
 * PCD_REPLAY_REASON_MAX bytes). */
int pcd_replay_bad_put(pcd_txn *txn, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                       const uint8_t new_key[PCACHE_DEVKEY_SIZE], const pcache__hash *state_hash,
                       const char *reason);
/* 0 (bad), PCACHE_ENOT_FOUND or PCACHE_ESTORE. */
int pcd_replay_bad_get(pcd_txn *txn, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                       const uint8_t new_key[PCACHE_DEVKEY_SIZE], const pcache__hash *state_hash);
typedef int (*pcd_replay_bad_cb)(void *ctx, const pcache__hash *state_hash, const char *reason,
                                 size_t reason_len);
int pcd_replay_bad_foreach(pcd_txn *txn, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                           const uint8_t new_key[PCACHE_DEVKEY_SIZE], pcd_replay_bad_cb cb,
                           void *ctx);

/* The state hashes filed under app on a device, in key order, from the
 * first after `after` (NULL: from the first). */
typedef int (*pcd_hash_cb)(void *ctx, const pcache__hash *state_hash);
int pcd_app_hashes_after(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                         const char *app, const pcache__hash *after, pcd_hash_cb cb, void *ctx);
/* The LRU index newest first, from the key before `before` (NULL: from the
 * newest), calling cb with each LRU key (PCD_LRU_KEY_SIZE bytes) of
 * device_key's entries; entries of other devices are passed over. */
typedef int (*pcd_lru_cb)(void *ctx, const uint8_t lru_key[PCD_LRU_KEY_SIZE]);
int pcd_lru_newest_before(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                          const uint8_t *before, pcd_lru_cb cb, void *ctx);

#endif
