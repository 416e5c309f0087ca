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

/* What a counter sums: the key and value bytes of a database, only its
 * keys (a snapshot's snapdata key, which has the snapshots record's key),
 * or only its values (blobs, descriptions, snapshot data). */
typedef enum { SUM_KV, SUM_KEYS, SUM_VALUES } sum_what;
typedef struct recount_source {
  MDB_dbi dbi;
  sum_what what;
} recount_source;

struct recount {
  uint64_t bytes;
  sum_what what;
};

static int recount_visit(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct recount *c = ctx;
  c->bytes += (c->what != SUM_VALUES ? k->mv_size : 0) + (c->what != SUM_KEYS ? v->mv_size : 0);
  return 0;
}

static int sum_sources(pcd_txn *t, const recount_source *sources, size_t n, uint64_t *ret) {
  struct recount c = {0};
  int r;
  for (size_t i = 0; i < n; i++) {
    c.what = sources[i].what;
    if ((r = pcd_db_scan(t, sources[i].dbi, NULL, 0, recount_visit, &c)) < 0)
      return r;
  }
  *ret = c.bytes;
  return 0;
}

/* Each counter in `info` and the records it sums (docs/storage.md,
 * "Databases"): the one definition the cap, Stats, Purge and List use. */
#define COUNTERS(X)                                                                                \
  X("bytes", {s->blobs, SUM_VALUES}, {s->descs, SUM_VALUES})                                       \
  X("module_bytes", {s->modules, SUM_KV})                                                          \
  X("device_bytes", {s->devices, SUM_KV})                                                          \
  X("index_bytes", {s->entries, SUM_KV}, {s->lru, SUM_KV}, {s->apps, SUM_KV},                      \
    {s->snapshots, SUM_KV}, {s->snapshots, SUM_KEYS})                                              \
  X("snap_bytes", {s->snapdata, SUM_VALUES})

/* Sets counter `name` to the bytes of sources when it is absent (a store
 * written before the counter existed), or always when force is set. */
static int recount(pcd_txn *t, const char *name, const recount_source *sources, size_t n, int force,
                   int *ret_done) {
  uint64_t bytes;
  uint8_t buf[8];
  MDB_val v;
  int r = pcd_db_get(t, t->store->info, name, strlen(name), &v, name);
  if (r != PCACHE_ENOT_FOUND && !(force && r == 0))
    return r;
  if ((r = sum_sources(t, sources, n, &bytes)) < 0)
    return r;
  pcache__put_le64(buf, bytes);
  *ret_done = 1;
  return pcd_db_put(t, t->store->info, name, strlen(name), buf, 8, name);
}

int pcd_counters_check(pcd_txn *txn, pcd_counter_drift *ret_drift, size_t cap, size_t *ret_n,
                       int repair) {
  pcd_store *s = txn->store;
  size_t n = 0;
  int r = 0, done = 0;
#define CHECK_ONE(counter, ...)                                                                    \
  if (r == 0) {                                                                                    \
    const recount_source src[] = {__VA_ARGS__};                                                    \
    uint64_t stored, summed;                                                                       \
    if ((r = get_counter(txn, counter, &stored)) == 0 &&                                           \
        (r = sum_sources(txn, src, sizeof src / sizeof src[0], &summed)) == 0 &&                   \
        stored != summed) {                                                                        \
      if (n < cap)                                                                                 \
        ret_drift[n] = (pcd_counter_drift){counter, stored, summed};                               \
      n++;                                                                                         \
      if (repair)                                                                                  \
        r = recount(txn, counter, src, sizeof src / sizeof src[0], 1, &done);                      \
    }                                                                                              \
  }
  COUNTERS(CHECK_ONE)
#undef CHECK_ONE
  *ret_n = n;
  return r;
}

int pcd_store_count_sizes(pcd_store *store) {
  pcd_store *s = store;
  pcd_txn *t;
  int done = 0, r = pcd_txn_begin(store, 1, &t);
  if (r < 0)
    return r;
    /* Only the counters a store from before them lacks; "bytes" and
     * "snap_bytes" were there from the first format. */
#define RECOUNT_MISSING(counter, ...)                                                              \
  if (r == 0 && strcmp(counter, "bytes") && strcmp(counter, "snap_bytes")) {                       \
    const recount_source src[] = {__VA_ARGS__};                                                    \
    r = recount(t, counter, src, sizeof src / sizeof src[0], 0, &done);                            \
  }
  COUNTERS(RECOUNT_MISSING)
#undef RECOUNT_MISSING
  if (r < 0 || !done) {
    pcd_txn_abort(t);
    return r;
  }
  return pcd_txn_commit(t);
}
