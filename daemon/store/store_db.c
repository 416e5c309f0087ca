/* The LMDB primitives every store file uses: reads, writes and deletes
 * that check a value before LMDB frees it, prefix scans, and LMDB's
 * return codes as PCACHE_E*. */
#include "store_internal.h"

#include <string.h>

#include <pcache/pcache.h>

#include "common/log.h"
#include "store_check.h"

int pcd_db_err(pcd_txn *t, int rc, const char *what) {
  switch (rc) {
  case MDB_SUCCESS:
    return 0;
  case MDB_NOTFOUND:
    return PCACHE_ENOT_FOUND;
  case MDB_MAP_FULL:
    if (t)
      t->err = PCACHE_EFULL;
    return PCACHE_EFULL;
  default:
    log_error("store: %s: %s", what, mdb_strerror(rc));
    if (t)
      t->err = PCACHE_ESTORE;
    return PCACHE_ESTORE;
  }
}

int pcd_db_get(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, MDB_val *v,
               const char *what) {
  MDB_val k = {key_size, (void *)key};
  return pcd_db_err(t, mdb_get(t->txn, dbi, &k, v), what);
}

int pcd_db_scan(pcd_txn *t, MDB_dbi dbi, const void *prefix, size_t prefix_len, pcd_db_kv_cb cb,
                void *ctx) {
  MDB_cursor *cur;
  MDB_val k = {prefix_len, (void *)prefix}, v;
  int rc = mdb_cursor_open(t->txn, dbi, &cur), r = 0;
  if (rc)
    return pcd_db_err(t, rc, "cursor");
  rc = mdb_cursor_get(cur, &k, &v, prefix_len ? MDB_SET_RANGE : MDB_FIRST);
  while (rc == 0) {
    if (prefix_len && (k.mv_size < prefix_len || memcmp(k.mv_data, prefix, prefix_len) != 0))
      break;
    r = cb(ctx, &k, &v);
    if (r)
      break;
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (r)
    return r;
  return rc == MDB_NOTFOUND || rc == 0 ? 0 : pcd_db_err(t, rc, "scan");
}

/* LMDB trusts an overflow page's header when it frees the value (a delete,
 * or a put over it) and aborts the process on a bad one. So before that,
 * for the databases whose values can be that large, the old value's pages
 * are checked here, and a damaged one fails the transaction instead. */
static int check_before_free(pcd_txn *t, MDB_dbi dbi, MDB_val *k, const char *what) {
  pcd_store *s = t->store;
  char why[300];
  MDB_val old;
  if (dbi != s->blobs && dbi != s->descs && dbi != s->modules && dbi != s->snapdata)
    return 0;
  if (mdb_get(t->txn, dbi, k, &old) != 0 || !pcd_store_check_value(s->env, &old, why, sizeof why))
    return 0;
  log_error("store: %s: not freeing a damaged value (%s); pcachectl verify reports it, and "
            "the next start of pcached moves the store aside",
            what, why);
  t->err = PCACHE_ESTORE;
  return PCACHE_ESTORE;
}

int pcd_db_put(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, const void *val,
               size_t val_size, const char *what) {
  MDB_val k = {key_size, (void *)key}, v = {val_size, (void *)val};
  int r = check_before_free(t, dbi, &k, what);
  return r ? r : pcd_db_err(t, mdb_put(t->txn, dbi, &k, &v, 0), what);
}

int pcd_db_del(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, const char *what) {
  MDB_val k = {key_size, (void *)key};
  int r = check_before_free(t, dbi, &k, what);
  if (r == 0)
    r = pcd_db_err(t, mdb_del(t->txn, dbi, &k, NULL), what);
  return r == PCACHE_ENOT_FOUND ? 0 : r;
}
