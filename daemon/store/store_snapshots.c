/* Snapshots: one a (device, app), its small metadata record apart from
 * its data (the state hashes it covers, then the blob), so that listing
 * and eviction never read blob pages (docs/storage.md "Snapshots"). */
#include "store_internal.h"

#include <string.h>

#include <pcache/pcache.h>

#include "common/bytes.h"

#define SNAP_VERSION 1
#define SNAP_SIZE 48
#define SNAP_KEY_MAX (PCACHE_DEVKEY_SIZE + PCD_MAX_APP)

static size_t snap_key(uint8_t out[SNAP_KEY_MAX], const uint8_t *devkey, const char *app) {
  size_t n = strnlen(app, PCD_MAX_APP);
  memcpy(out, devkey, PCACHE_DEVKEY_SIZE);
  memcpy(out + PCACHE_DEVKEY_SIZE, app, n);
  return PCACHE_DEVKEY_SIZE + n;
}

static int decode_snap(const MDB_val *k, const MDB_val *v, pcd_snapshot *s) {
  const uint8_t *p = v->mv_data;
  size_t app_len;
  if (k->mv_size < PCACHE_DEVKEY_SIZE || k->mv_size > SNAP_KEY_MAX || v->mv_size != SNAP_SIZE ||
      p[0] != SNAP_VERSION)
    return PCACHE_ESTORE;
  app_len = k->mv_size - PCACHE_DEVKEY_SIZE;
  memcpy(s->device_key, k->mv_data, PCACHE_DEVKEY_SIZE);
  memcpy(s->app, (const uint8_t *)k->mv_data + PCACHE_DEVKEY_SIZE, app_len);
  s->app[app_len] = '\0';
  s->blob_size = pcache__le64(p + 8);
  s->n_hashes = pcache__le64(p + 16);
  s->checksum = pcache__le64(p + 24);
  s->created_us = pcache__le64(p + 32);
  return 0;
}

int pcd_snapshot_get(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE], const char *app,
                     pcd_snapshot *ret_snapshot, const uint8_t **ret_hashes,
                     const uint8_t **ret_blob) {
  uint8_t key[SNAP_KEY_MAX];
  MDB_val k = {snap_key(key, device_key, app), key}, v, d;
  int r = pcd_db_get(txn, txn->store->snapshots, key, k.mv_size, &v, "get snapshot");
  if (r < 0)
    return r;
  if ((r = decode_snap(&k, &v, ret_snapshot)) < 0)
    return r;
  if (!ret_hashes && !ret_blob)
    return 0;
  r = pcd_db_get(txn, txn->store->snapdata, key, k.mv_size, &d, "get snapshot data");
  if (r == PCACHE_ENOT_FOUND)
    return PCACHE_ESTORE; /* metadata without its data */
  if (r < 0)
    return r;
  /* Sizes are checked here; the blob's checksum by whoever sends it. */
  if (ret_snapshot->n_hashes > d.mv_size / PCACHE_HASH_SIZE ||
      d.mv_size != ret_snapshot->n_hashes * PCACHE_HASH_SIZE + ret_snapshot->blob_size)
    return PCACHE_ESTORE;
  if (ret_hashes)
    *ret_hashes = d.mv_data;
  if (ret_blob)
    *ret_blob = (const uint8_t *)d.mv_data + ret_snapshot->n_hashes * PCACHE_HASH_SIZE;
  return 0;
}

struct snap_scan {
  pcd_snapshot_cb cb;
  void *ctx;
};

static int snap_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct snap_scan *s = ctx;
  pcd_snapshot snap;
  if (decode_snap(k, v, &snap) < 0)
    return 0; /* Verify finds these through its own walk */
  return s->cb(s->ctx, &snap);
}

int pcd_snapshots_foreach(pcd_txn *txn, const uint8_t *device_key, pcd_snapshot_cb cb, void *ctx) {
  struct snap_scan s = {cb, ctx};
  return pcd_db_scan(txn, txn->store->snapshots, device_key, device_key ? PCACHE_DEVKEY_SIZE : 0,
                     snap_kv, &s);
}

struct snap_oldest {
  const uint8_t *skip_key;
  const char *skip_app;
  pcd_snapshot best;
  int found;
};

static int oldest_visit(void *ctx, const pcd_snapshot *s) {
  struct snap_oldest *o = ctx;
  if (o->skip_key && memcmp(s->device_key, o->skip_key, PCACHE_DEVKEY_SIZE) == 0 &&
      strcmp(s->app, o->skip_app) == 0)
    return 0;
  if (!o->found || s->created_us < o->best.created_us) {
    o->best = *s;
    o->found = 1;
  }
  return 0;
}

int pcd_snapshot_oldest(pcd_txn *txn, const uint8_t *skip_key, const char *skip_app,
                        pcd_snapshot *ret_snapshot) {
  /* A walk of the metadata: there is one snapshot per (device, app), a
   * handful, not one per pipeline. */
  struct snap_oldest o = {.skip_key = skip_key, .skip_app = skip_app ? skip_app : ""};
  int r = pcd_snapshots_foreach(txn, NULL, oldest_visit, &o);
  if (r < 0)
    return r;
  if (!o.found)
    return PCACHE_ENOT_FOUND;
  *ret_snapshot = o.best;
  return 0;
}

/* A snapshot's records besides its data: the snapshots record (key and
 * value) and the snapdata key, what index_bytes counts for it. */
static uint64_t snap_record_cost(size_t key_size) { return 2 * key_size + SNAP_SIZE; }

static int add_record_cost(void *ctx, const pcd_snapshot *s) {
  *(uint64_t *)ctx += snap_record_cost(PCACHE_DEVKEY_SIZE + strnlen(s->app, PCD_MAX_APP));
  return 0;
}

int pcd_snapshots_record_bytes(pcd_txn *txn, uint64_t *ret_bytes) {
  uint64_t bytes = 0;
  int r = pcd_snapshots_foreach(txn, NULL, add_record_cost, &bytes);
  if (r == 0)
    *ret_bytes = bytes;
  return r;
}

static int add_snap_bytes(pcd_txn *t, int64_t delta) {
  return pcd_counter_add(t, "snap_bytes", delta);
}

int pcd_snapshot_store(pcd_txn *txn, const pcd_snapshot *snapshot, const void *hashes,
                       const void *blob) {
  uint8_t key[SNAP_KEY_MAX], meta[SNAP_SIZE];
  size_t key_size = snap_key(key, snapshot->device_key, snapshot->app);
  size_t hash_bytes = snapshot->n_hashes * PCACHE_HASH_SIZE;
  MDB_val k = {key_size, key}, v = {hash_bytes + snapshot->blob_size, NULL};
  uint64_t old = 0;
  int r = pcd_snapshot_delete(txn, snapshot->device_key, snapshot->app, &old);
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  pcd_txn_note_change(txn, snapshot->device_key, snapshot->app);
  memset(meta, 0, sizeof meta);
  meta[0] = SNAP_VERSION;
  pcache__put_le64(meta + 8, snapshot->blob_size);
  pcache__put_le64(meta + 16, snapshot->n_hashes);
  pcache__put_le64(meta + 24, snapshot->checksum);
  pcache__put_le64(meta + 32, snapshot->created_us);
  /* MDB_RESERVE: the hash list and the blob are copied once, straight
   * into the page, with no buffer to join them. */
  r = pcd_db_err(txn, mdb_put(txn->txn, txn->store->snapdata, &k, &v, MDB_RESERVE), "put snapdata");
  if (r < 0)
    return r;
  if (hash_bytes)
    memcpy(v.mv_data, hashes, hash_bytes);
  if (snapshot->blob_size)
    memcpy((uint8_t *)v.mv_data + hash_bytes, blob, snapshot->blob_size);
  if ((r = pcd_db_put(txn, txn->store->snapshots, key, key_size, meta, SNAP_SIZE, "put snapshot")) <
          0 ||
      (r = pcd_counter_add(txn, "index_bytes", (int64_t)snap_record_cost(key_size))) < 0)
    return r;
  return add_snap_bytes(txn, (int64_t)(hash_bytes + snapshot->blob_size));
}

int pcd_snapshot_delete(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE], const char *app,
                        uint64_t *ret_bytes) {
  uint8_t key[SNAP_KEY_MAX];
  size_t key_size = snap_key(key, device_key, app);
  MDB_val v;
  uint64_t bytes = 0;
  int r = pcd_db_get(txn, txn->store->snapdata, key, key_size, &v, "get snapshot data"),
      found = r == 0;
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (found)
    bytes = v.mv_size;
  r = pcd_db_get(txn, txn->store->snapshots, key, key_size, &v, "get snapshot");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  found |= r == 0;
  if (!found)
    return PCACHE_ENOT_FOUND;
  pcd_txn_note_change(txn, device_key, app);
  if ((r = pcd_db_del(txn, txn->store->snapdata, key, key_size, "del snapdata")) < 0 ||
      (r = pcd_db_del(txn, txn->store->snapshots, key, key_size, "del snapshot")) < 0 ||
      (r = add_snap_bytes(txn, -(int64_t)bytes)) < 0 ||
      (r = pcd_counter_add(txn, "index_bytes", -(int64_t)snap_record_cost(key_size))) < 0 ||
      (r = pcd_device_forget(txn, device_key)) < 0)
    return r;
  if (ret_bytes)
    *ret_bytes = bytes + snap_record_cost(key_size);
  return 0;
}
