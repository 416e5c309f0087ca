/* The size counters in `info` that --max-size is held to (docs/storage.md,
 * "Databases" and "Snapshots"): kept up by every write, read back with the
 * record counts as the totals, and counted once from the records for a
 * store written before a counter existed. */
#include "store_internal.h"

#include <string.h>

#include <pcache/pcache.h>

#include "common/bytes.h"

static uint64_t db_count(pcd_txn *t, MDB_dbi dbi) {
  MDB_stat st;
  return mdb_stat(t->txn, dbi, &st) ? 0 : st.ms_entries;
}

/* A u64 counter in `info`; 0 when absent (a store from before it). */
static int get_counter(pcd_txn *t, const char *name, uint64_t *ret) {
  MDB_val v;
  int r = pcd_db_get(t, t->store->info, name, strlen(name), &v, name);
  *ret = 0;
  if (r == PCACHE_ENOT_FOUND)
    return 0;
  if (r < 0)
    return r;
  if (v.mv_size == 8)
    *ret = pcache__le64(v.mv_data);
  return 0;
}

int pcd_totals_get(pcd_txn *txn, pcd_totals *ret_totals) {
  MDB_val v;
  pcd_totals t = {0};
  int r = pcd_db_get(txn, txn->store->info, "bytes", 5, &v, "get bytes");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0 && v.mv_size == 8)
    t.entry_bytes = pcache__le64(v.mv_data);
  if ((r = get_counter(txn, "module_bytes", &t.module_bytes)) < 0 ||
      (r = get_counter(txn, "device_bytes", &t.device_bytes)) < 0)
    return r;
  if ((r = get_counter(txn, "index_bytes", &t.index_bytes)) < 0)
    return r;
  t.bytes = t.entry_bytes + t.module_bytes + t.device_bytes + t.index_bytes;
  t.entries = db_count(txn, txn->store->entries);
  t.devices = db_count(txn, txn->store->devices);
  t.modules = db_count(txn, txn->store->modules);
  t.snapshots = db_count(txn, txn->store->snapshots);
  r = pcd_db_get(txn, txn->store->info, "snap_bytes", 10, &v, "get snap_bytes");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0 && v.mv_size == 8)
    t.snapshot_bytes = pcache__le64(v.mv_data);
  t.map_size = txn->store->map_size;
  *ret_totals = t;
  return 0;
}

int pcd_counter_add(pcd_txn *t, const char *name, int64_t delta) {
  MDB_val v;
  uint8_t buf[8];
  uint64_t cur = 0;
  int r = pcd_db_get(t, t->store->info, name, strlen(name), &v, name);
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0 && v.mv_size == 8)
    cur = pcache__le64(v.mv_data);
  cur = delta < 0 && (uint64_t)-delta > cur ? 0 : cur + (uint64_t)delta;
  pcache__put_le64(buf, cur);
  return pcd_db_put(t, t->store->info, name, strlen(name), buf, 8, name);
}

struct recount {
  uint64_t bytes;
};

static int recount_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  ((struct recount *)ctx)->bytes += k->mv_size + v->mv_size;
  return 0;
}

static int recount_key(void *ctx, const MDB_val *k, const MDB_val *v) {
  ((struct recount *)ctx)->bytes += k->mv_size;
  return 0;
}

/* What a counter sums: the key and value bytes of a database, or only its
 * keys (a snapshot's snapdata key, which has the snapshots record's key). */
typedef struct recount_source {
  MDB_dbi dbi;
  int keys_only;
} recount_source;

/* Sets counter `name` to the bytes of sources when it is absent: a store
 * written before the counter existed. */
static int recount(pcd_txn *t, const char *name, const recount_source *sources, size_t n,
                   int *ret_done) {
  struct recount c = {0};
  uint8_t buf[8];
  MDB_val v;
  int r = pcd_db_get(t, t->store->info, name, strlen(name), &v, name);
  if (r != PCACHE_ENOT_FOUND)
    return r;
  for (size_t i = 0; i < n; i++)
    if ((r = pcd_db_scan(t, sources[i].dbi, NULL, 0,
                         sources[i].keys_only ? recount_key : recount_kv, &c)) < 0)
      return r;
  pcache__put_le64(buf, c.bytes);
  *ret_done = 1;
  return pcd_db_put(t, t->store->info, name, strlen(name), buf, 8, name);
}

int pcd_store_count_sizes(pcd_store *store) {
  pcd_txn *t;
  int done = 0, r = pcd_txn_begin(store, 1, &t);
  if (r < 0)
    return r;
  const recount_source modules[] = {{store->modules, 0}}, devices[] = {{store->devices, 0}};
  /* index_bytes: each entry's entries, lru and apps records, each
   * snapshot's record and its key once more for its snapdata. */
  const recount_source index[] = {{store->entries, 0},
                                  {store->lru, 0},
                                  {store->apps, 0},
                                  {store->snapshots, 0},
                                  {store->snapshots, 1}};
  if ((r = recount(t, "module_bytes", modules, 1, &done)) < 0 ||
      (r = recount(t, "device_bytes", devices, 1, &done)) < 0 ||
      (r = recount(t, "index_bytes", index, 5, &done)) < 0 || !done) {
    pcd_txn_abort(t);
    return r;
  }
  return pcd_txn_commit(t);
}
