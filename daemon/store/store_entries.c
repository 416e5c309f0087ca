/* Entries: each one's metadata, blob and description under its entry key,
 * and the two indexes that find it, by last use (lru, the eviction order)
 * and by app (apps). A write keeps all of them, the module references its
 * description holds, its device's counts and the size counters in step. */
#include "store_internal.h"

#include <string.h>

#include <pcache/pcache.h>

#include "common/bytes.h"
#include "proto/desc_check.h"

#define META_VERSION 1
#define META_SIZE 64
#define LRU_KEY_SIZE (8 + PCD_ENTRY_KEY_SIZE)

static void put_be64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static int decode_meta(const uint8_t key[PCD_ENTRY_KEY_SIZE], const MDB_val *v, pcd_entry *e) {
  const uint8_t *p = v->mv_data;
  size_t app_len;
  if (v->mv_size < META_SIZE || p[0] != META_VERSION)
    return PCACHE_ESTORE;
  app_len = (size_t)p[2] | (size_t)p[3] << 8;
  if (app_len > PCD_MAX_APP || v->mv_size != META_SIZE + app_len)
    return PCACHE_ESTORE;
  memcpy(e->key, key, PCD_ENTRY_KEY_SIZE);
  e->kind = p[1];
  e->blob_size = pcache__le64(p + 8);
  e->desc_size = pcache__le64(p + 16);
  e->checksum = pcache__le64(p + 24);
  e->created_us = pcache__le64(p + 32);
  e->last_used_us = pcache__le64(p + 40);
  e->hits = pcache__le64(p + 48);
  e->compile_ns = pcache__le64(p + 56);
  memcpy(e->app, p + META_SIZE, app_len);
  e->app[app_len] = '\0';
  return 0;
}

static size_t encode_meta(const pcd_entry *e, uint8_t out[META_SIZE + PCD_MAX_APP]) {
  size_t app_len = strnlen(e->app, PCD_MAX_APP);
  memset(out, 0, META_SIZE);
  out[0] = META_VERSION;
  out[1] = (uint8_t)e->kind;
  out[2] = (uint8_t)app_len;
  out[3] = (uint8_t)(app_len >> 8);
  pcache__put_le64(out + 8, e->blob_size);
  pcache__put_le64(out + 16, e->desc_size);
  pcache__put_le64(out + 24, e->checksum);
  pcache__put_le64(out + 32, e->created_us);
  pcache__put_le64(out + 40, e->last_used_us);
  pcache__put_le64(out + 48, e->hits);
  pcache__put_le64(out + 56, e->compile_ns);
  memcpy(out + META_SIZE, e->app, app_len);
  return META_SIZE + app_len;
}

static size_t lru_key(uint8_t out[LRU_KEY_SIZE], uint64_t t, const uint8_t *key) {
  put_be64(out, t);
  memcpy(out + 8, key, PCD_ENTRY_KEY_SIZE);
  return LRU_KEY_SIZE;
}

static size_t app_key(uint8_t out[PCACHE_DEVKEY_SIZE + PCD_MAX_APP + 1 + PCACHE_HASH_SIZE],
                      const uint8_t *key, const char *app) {
  size_t n = strnlen(app, PCD_MAX_APP);
  memcpy(out, key, PCACHE_DEVKEY_SIZE);
  memcpy(out + PCACHE_DEVKEY_SIZE, app, n);
  out[PCACHE_DEVKEY_SIZE + n] = 0;
  memcpy(out + PCACHE_DEVKEY_SIZE + n + 1, key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  return PCACHE_DEVKEY_SIZE + n + 1 + PCACHE_HASH_SIZE;
}

int pcd_entry_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], pcd_entry *ret_entry) {
  MDB_val v;
  int r = pcd_db_get(txn, txn->store->entries, key, PCD_ENTRY_KEY_SIZE, &v, "get entry");
  return r < 0 ? r : decode_meta(key, &v, ret_entry);
}

/* The value under an entry key in dbi, valid until the transaction ends. */
static int entry_value(pcd_txn *txn, MDB_dbi dbi, const uint8_t key[PCD_ENTRY_KEY_SIZE],
                       const char *what, const uint8_t **ret_value, size_t *ret_size) {
  MDB_val v;
  int r = pcd_db_get(txn, dbi, key, PCD_ENTRY_KEY_SIZE, &v, what);
  if (r < 0)
    return r;
  *ret_value = v.mv_data;
  *ret_size = v.mv_size;
  return 0;
}

int pcd_blob_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], const uint8_t **ret_blob,
                 size_t *ret_size) {
  return entry_value(txn, txn->store->blobs, key, "get blob", ret_blob, ret_size);
}

int pcd_desc_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], const uint8_t **ret_desc,
                 size_t *ret_size) {
  return entry_value(txn, txn->store->descs, key, "get desc", ret_desc, ret_size);
}

struct entry_scan {
  pcd_txn *txn;
  pcd_entry_cb cb;
  void *ctx;
};

static int entry_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct entry_scan *s = ctx;
  pcd_entry e;
  if (k->mv_size != PCD_ENTRY_KEY_SIZE || decode_meta(k->mv_data, v, &e) < 0)
    return 0; /* Verify reports these through pcd_entry_get */
  return s->cb(s->ctx, &e);
}

int pcd_entries_foreach(pcd_txn *txn, const uint8_t *device_key, pcd_entry_cb cb, void *ctx) {
  struct entry_scan s = {txn, cb, ctx};
  return pcd_db_scan(txn, txn->store->entries, device_key, device_key ? PCACHE_DEVKEY_SIZE : 0,
                     entry_kv, &s);
}

struct after_scan {
  struct entry_scan s;
  const uint8_t *after;
};

static int after_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct after_scan *a = ctx;
  if (k->mv_size == PCD_ENTRY_KEY_SIZE && memcmp(k->mv_data, a->after, PCD_ENTRY_KEY_SIZE) == 0)
    return 0;
  return entry_kv(&a->s, k, v);
}

int pcd_entries_after(pcd_txn *txn, const uint8_t *device_key,
                      const uint8_t after_key[PCD_ENTRY_KEY_SIZE], pcd_entry_cb cb, void *ctx) {
  struct after_scan a = {{txn, cb, ctx}, after_key};
  MDB_cursor *cur;
  MDB_val k = {PCD_ENTRY_KEY_SIZE, (void *)after_key}, v;
  int rc = mdb_cursor_open(txn->txn, txn->store->entries, &cur), r = 0;
  if (rc)
    return pcd_db_err(txn, rc, "cursor");
  /* From the first key >= after_key, skipping after_key itself. */
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (device_key &&
        (k.mv_size < PCACHE_DEVKEY_SIZE || memcmp(k.mv_data, device_key, PCACHE_DEVKEY_SIZE) != 0))
      break;
    if ((r = after_kv(&a, &k, &v)) != 0)
      break;
  }
  mdb_cursor_close(cur);
  if (r)
    return r;
  return rc == MDB_NOTFOUND || rc == 0 ? 0 : pcd_db_err(txn, rc, "scan");
}

static int app_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct entry_scan *s = ctx;
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  (void)v;
  memcpy(key, k->mv_data, PCACHE_DEVKEY_SIZE);
  memcpy(key + PCACHE_DEVKEY_SIZE, (const uint8_t *)k->mv_data + k->mv_size - PCACHE_HASH_SIZE,
         PCACHE_HASH_SIZE);
  if (pcd_entry_get(s->txn, key, &e) < 0)
    return 0;
  return s->cb(s->ctx, &e);
}

int pcd_app_foreach(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE], const char *app,
                    pcd_entry_cb cb, void *ctx) {
  uint8_t prefix[PCACHE_DEVKEY_SIZE + PCD_MAX_APP + 1];
  size_t n = strnlen(app, PCD_MAX_APP);
  struct entry_scan s = {txn, cb, ctx};
  memcpy(prefix, device_key, PCACHE_DEVKEY_SIZE);
  memcpy(prefix + PCACHE_DEVKEY_SIZE, app, n);
  prefix[PCACHE_DEVKEY_SIZE + n] = 0;
  return pcd_db_scan(txn, txn->store->apps, prefix, PCACHE_DEVKEY_SIZE + n + 1, app_kv, &s);
}

int pcd_lru_oldest(pcd_txn *txn, uint8_t ret_key[PCD_ENTRY_KEY_SIZE]) {
  MDB_cursor *cur;
  MDB_val k, v;
  int rc = mdb_cursor_open(txn->txn, txn->store->lru, &cur);
  if (rc)
    return pcd_db_err(txn, rc, "cursor");
  rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  mdb_cursor_close(cur);
  if (rc)
    return pcd_db_err(txn, rc, "lru first");
  if (k.mv_size != LRU_KEY_SIZE)
    return PCACHE_ESTORE;
  memcpy(ret_key, (const uint8_t *)k.mv_data + 8, PCD_ENTRY_KEY_SIZE);
  return 0;
}

static int add_bytes(pcd_txn *t, int64_t delta) { return pcd_counter_add(t, "bytes", delta); }

/* Drops the module references an entry's stored description holds. A
 * description that no longer parses holds none we can name. */
static int unref_desc_modules(pcd_txn *t, const uint8_t key[PCD_ENTRY_KEY_SIZE]) {
  pcache__hash mods[PCACHE_DESC_MAX_MODULES], sh;
  const uint8_t *desc;
  size_t size, n = 0;
  int r = pcd_desc_get(t, key, &desc, &size);
  if (r == PCACHE_ENOT_FOUND)
    return 0;
  if (r < 0)
    return r;
  memcpy(sh.bytes, key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  if (pcache__desc_check(desc, size, &sh, 0, mods, &n) < 0)
    return 0;
  for (size_t i = 0; i < n; i++)
    if ((r = pcd_module_unref(t, &mods[i])) < 0)
      return r;
  return 0;
}

static int delete_indexes(pcd_txn *t, const pcd_entry *e) {
  uint8_t lk[LRU_KEY_SIZE], ak[PCACHE_DEVKEY_SIZE + PCD_MAX_APP + 1 + PCACHE_HASH_SIZE];
  int r = pcd_db_del(t, t->store->lru, lk, lru_key(lk, e->last_used_us, e->key), "del lru");
  if (r < 0)
    return r;
  return pcd_db_del(t, t->store->apps, ak, app_key(ak, e->key, e->app), "del app");
}

uint64_t pcd_entry_index_cost(size_t app_len) {
  return PCD_ENTRY_KEY_SIZE + META_SIZE + app_len               /* entries */
         + LRU_KEY_SIZE                                         /* lru */
         + PCACHE_DEVKEY_SIZE + app_len + 1 + PCACHE_HASH_SIZE; /* apps */
}

static int64_t index_cost_of(const pcd_entry *e) {
  return (int64_t)pcd_entry_index_cost(strnlen(e->app, PCD_MAX_APP));
}

uint64_t pcd_entry_size(const pcd_entry *e) {
  return e->blob_size + e->desc_size + (uint64_t)index_cost_of(e);
}

int pcd_entry_store(pcd_txn *txn, const pcd_entry *entry, const void *blob, const void *desc) {
  uint8_t meta[META_SIZE + PCD_MAX_APP], lk[LRU_KEY_SIZE],
      ak[PCACHE_DEVKEY_SIZE + PCD_MAX_APP + 1 + PCACHE_HASH_SIZE];
  pcd_entry e = *entry, old;
  int64_t old_bytes = 0, had = 0;
  int r = pcd_entry_get(txn, entry->key, &old);
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0) {
    had = 1;
    old_bytes = (int64_t)(old.blob_size + old.desc_size);
    e.created_us = old.created_us;
    e.hits = old.hits;
    if (e.last_used_us < old.last_used_us)
      e.last_used_us = old.last_used_us;
    /* The old blob and description go first: put over a value this
     * transaction wrote, LMDB would write the new one into its overflow
     * pages and keep their count, which the store check (store_check.h)
     * rightly takes for damage when it is more than the value needs. */
    if ((r = unref_desc_modules(txn, entry->key)) < 0 || (r = delete_indexes(txn, &old)) < 0 ||
        (r = pcd_db_del(txn, txn->store->blobs, e.key, PCD_ENTRY_KEY_SIZE, "del blob")) < 0 ||
        (r = pcd_db_del(txn, txn->store->descs, e.key, PCD_ENTRY_KEY_SIZE, "del desc")) < 0)
      return r;
    pcd_txn_note_change(txn, e.key, old.app); /* refiled from another app, or replaced */
  }
  pcd_txn_note_change(txn, e.key, e.app);
  if ((r = pcd_db_put(txn, txn->store->blobs, e.key, PCD_ENTRY_KEY_SIZE, blob, e.blob_size,
                      "put blob")) < 0 ||
      (r = pcd_db_put(txn, txn->store->descs, e.key, PCD_ENTRY_KEY_SIZE, desc, e.desc_size,
                      "put desc")) < 0 ||
      (r = pcd_db_put(txn, txn->store->entries, e.key, PCD_ENTRY_KEY_SIZE, meta,
                      encode_meta(&e, meta), "put entry")) < 0 ||
      (r = pcd_db_put(txn, txn->store->lru, lk, lru_key(lk, e.last_used_us, e.key), "", 0,
                      "put lru")) < 0 ||
      (r = pcd_db_put(txn, txn->store->apps, ak, app_key(ak, e.key, e.app), "", 0, "put app")) < 0)
    return r;
  r = add_bytes(txn, (int64_t)(e.blob_size + e.desc_size) - old_bytes);
  if (r == 0)
    r = pcd_counter_add(txn, "index_bytes", index_cost_of(&e) - (had ? index_cost_of(&old) : 0));
  if (r < 0)
    return r;
  return pcd_device_add(txn, e.key, 1 - had, (int64_t)(e.blob_size + e.desc_size) - old_bytes);
}

int pcd_entry_delete(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t *ret_bytes) {
  pcd_entry e;
  uint64_t bytes;
  int r = pcd_entry_get(txn, key, &e);
  if (r == PCACHE_ESTORE) {
    /* Unreadable metadata: remove what we can by key. */
    memset(&e, 0, sizeof e);
    memcpy(e.key, key, PCD_ENTRY_KEY_SIZE);
  } else if (r < 0) {
    return r;
  }
  bytes = e.blob_size + e.desc_size;
  pcd_txn_note_change(txn, key, r == 0 ? e.app : NULL);
  if ((r = unref_desc_modules(txn, key)) < 0 || (r = delete_indexes(txn, &e)) < 0 ||
      (r = pcd_db_del(txn, txn->store->blobs, key, PCD_ENTRY_KEY_SIZE, "del blob")) < 0 ||
      (r = pcd_db_del(txn, txn->store->descs, key, PCD_ENTRY_KEY_SIZE, "del desc")) < 0 ||
      (r = pcd_db_del(txn, txn->store->entries, key, PCD_ENTRY_KEY_SIZE, "del entry")) < 0 ||
      (r = add_bytes(txn, -(int64_t)bytes)) < 0 ||
      (r = pcd_counter_add(txn, "index_bytes", -index_cost_of(&e))) < 0 ||
      (r = pcd_device_add(txn, key, -1, -(int64_t)bytes)) < 0)
    return r;
  if (ret_bytes)
    *ret_bytes = pcd_entry_size(&e);
  return 0;
}

int pcd_entry_touch(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t last_used_us,
                    uint64_t hits) {
  uint8_t meta[META_SIZE + PCD_MAX_APP], lk[LRU_KEY_SIZE];
  pcd_entry e;
  int r = pcd_entry_get(txn, key, &e);
  if (r == PCACHE_ENOT_FOUND || r == PCACHE_ESTORE)
    return 0;
  if (r < 0)
    return r;
  if (last_used_us > e.last_used_us) {
    if ((r = pcd_db_del(txn, txn->store->lru, lk, lru_key(lk, e.last_used_us, key), "del lru")) < 0)
      return r;
    e.last_used_us = last_used_us;
    if ((r = pcd_db_put(txn, txn->store->lru, lk, lru_key(lk, e.last_used_us, key), "", 0,
                        "put lru")) < 0)
      return r;
  }
  e.hits += hits;
  return pcd_db_put(txn, txn->store->entries, key, PCD_ENTRY_KEY_SIZE, meta, encode_meta(&e, meta),
                    "put entry");
}
