/* SPIR-V modules, stored once by hash with a count of the entries whose
 * descriptions name them: a module is stored with its first reference,
 * dropped with its last, and counted against --max-size in between. */
#include "store_internal.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/bytes.h"

int pcd_module_get(pcd_txn *txn, const pcache__hash *hash, const uint8_t **ret_code,
                   size_t *ret_size) {
  MDB_val v;
  int r = pcd_db_get(txn, txn->store->modules, hash->bytes, PCACHE_HASH_SIZE, &v, "get module");
  if (r < 0)
    return r;
  if (v.mv_size < 4)
    return PCACHE_ESTORE;
  if (ret_code)
    *ret_code = (const uint8_t *)v.mv_data + 4;
  if (ret_size)
    *ret_size = v.mv_size - 4;
  return 0;
}

struct module_scan {
  pcd_module_cb cb;
  void *ctx;
};

static int module_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct module_scan *s = ctx;
  pcache__hash h;
  if (k->mv_size != PCACHE_HASH_SIZE || v->mv_size < 4)
    return 0;
  memcpy(h.bytes, k->mv_data, PCACHE_HASH_SIZE);
  return s->cb(s->ctx, &h, (const uint8_t *)v->mv_data + 4, v->mv_size - 4);
}

int pcd_modules_foreach(pcd_txn *txn, pcd_module_cb cb, void *ctx) {
  struct module_scan s = {cb, ctx};
  return pcd_db_scan(txn, txn->store->modules, NULL, 0, module_kv, &s);
}

int pcd_module_ref(pcd_txn *txn, const pcache__hash *hash, const void *code, size_t size) {
  MDB_val v;
  uint8_t *buf;
  int is_new,
      r = pcd_db_get(txn, txn->store->modules, hash->bytes, PCACHE_HASH_SIZE, &v, "get module");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0) {
    if (v.mv_size < 4)
      return PCACHE_ESTORE;
    size = v.mv_size - 4;
    code = (const uint8_t *)v.mv_data + 4;
  } else if (!code) {
    return PCACHE_EMISSING_MODULE;
  }
  buf = pcache__malloc(4 + size);
  if (!buf)
    return -ENOMEM;
  is_new = r != 0;
  pcache__put_le32(buf, r == 0 ? pcache__le32(v.mv_data) + 1 : 1);
  memcpy(buf + 4, code, size);
  r = pcd_db_put(txn, txn->store->modules, hash->bytes, PCACHE_HASH_SIZE, buf, 4 + size,
                 "put module");
  pcache__free(buf);
  /* A module counts against --max-size once, while anything names it. */
  if (r == 0 && is_new)
    r = pcd_counter_add(txn, "module_bytes", (int64_t)(PCACHE_HASH_SIZE + 4 + size));
  return r;
}

int pcd_module_unref(pcd_txn *t, const pcache__hash *hash) {
  MDB_val v;
  uint32_t refs;
  int r = pcd_db_get(t, t->store->modules, hash->bytes, PCACHE_HASH_SIZE, &v, "get module");
  if (r == PCACHE_ENOT_FOUND)
    return 0;
  if (r < 0)
    return r;
  refs = v.mv_size < 4 ? 0 : pcache__le32(v.mv_data);
  if (refs <= 1) {
    int64_t bytes = (int64_t)(PCACHE_HASH_SIZE + v.mv_size);
    if ((r = pcd_db_del(t, t->store->modules, hash->bytes, PCACHE_HASH_SIZE, "del module")) < 0)
      return r;
    return pcd_counter_add(t, "module_bytes", -bytes);
  }
  /* Rewrite in place: LMDB values are read-only, so copy. */
  {
    uint8_t *buf = pcache__malloc(v.mv_size);
    if (!buf)
      return -ENOMEM;
    memcpy(buf, v.mv_data, v.mv_size);
    pcache__put_le32(buf, refs - 1);
    r = pcd_db_put(t, t->store->modules, hash->bytes, PCACHE_HASH_SIZE, buf, v.mv_size,
                   "put module");
    pcache__free(buf);
  }
  return r;
}
