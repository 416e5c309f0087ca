/* Replay records in `info` (docs/storage.md): "replay\0" ‖ old key ‖ new
 * key -> a v1 progress record of 56 bytes (u8 version 1, u8 state, 6
 * zero, then u64 created µs, finished µs, total, done, failed), and
 * "replay_bad\0" ‖ old key ‖ new key ‖ state hash -> the reason, as
 * text; and "app_exe\0" ‖ app -> the program name the app's clients run
 * as (u8 version 1, 7 zero, u64 last seen in unix seconds, then the name,
 * 1..64 bytes), which the replayer builds the app's items under. They
 * live in `info` so that an older pcached opens the store
 * unchanged (it never reads these keys), and they are small: one per
 * replay and one per pipeline that failed. The walks the replay's order
 * needs are here too, since only store files know LMDB. */
#include "store_replay.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/bytes.h"
#include "store_internal.h"

#define REC_PREFIX "replay"     /* with its NUL: 7 bytes */
#define BAD_PREFIX "replay_bad" /* with its NUL: 11 bytes */
#define REC_PREFIX_SIZE (sizeof REC_PREFIX)
#define BAD_PREFIX_SIZE (sizeof BAD_PREFIX)
#define REC_KEY_SIZE (REC_PREFIX_SIZE + 2 * PCACHE_DEVKEY_SIZE)
#define BAD_KEY_SIZE (BAD_PREFIX_SIZE + 2 * PCACHE_DEVKEY_SIZE + PCACHE_HASH_SIZE)
#define REC_VERSION 1
#define REC_SIZE 56

static size_t rec_key(uint8_t out[REC_KEY_SIZE], const uint8_t *old_key, const uint8_t *new_key) {
  memcpy(out, REC_PREFIX, REC_PREFIX_SIZE);
  memcpy(out + REC_PREFIX_SIZE, old_key, PCACHE_DEVKEY_SIZE);
  memcpy(out + REC_PREFIX_SIZE + PCACHE_DEVKEY_SIZE, new_key, PCACHE_DEVKEY_SIZE);
  return REC_KEY_SIZE;
}

static size_t bad_key(uint8_t out[BAD_KEY_SIZE], const uint8_t *old_key, const uint8_t *new_key,
                      const pcache__hash *h) {
  memcpy(out, BAD_PREFIX, BAD_PREFIX_SIZE);
  memcpy(out + BAD_PREFIX_SIZE, old_key, PCACHE_DEVKEY_SIZE);
  memcpy(out + BAD_PREFIX_SIZE + PCACHE_DEVKEY_SIZE, new_key, PCACHE_DEVKEY_SIZE);
  if (h)
    memcpy(out + BAD_PREFIX_SIZE + 2 * PCACHE_DEVKEY_SIZE, h->bytes, PCACHE_HASH_SIZE);
  return BAD_KEY_SIZE;
}

static int decode_rec(const MDB_val *k, const MDB_val *v, pcd_replay_record *r) {
  const uint8_t *p = v->mv_data;
  if (k->mv_size != REC_KEY_SIZE || v->mv_size != REC_SIZE || p[0] != REC_VERSION)
    return PCACHE_ESTORE;
  memset(r, 0, sizeof *r);
  memcpy(r->old_key, (const uint8_t *)k->mv_data + REC_PREFIX_SIZE, PCACHE_DEVKEY_SIZE);
  memcpy(r->new_key, (const uint8_t *)k->mv_data + REC_PREFIX_SIZE + PCACHE_DEVKEY_SIZE,
         PCACHE_DEVKEY_SIZE);
  r->state = p[1];
  r->created_us = pcache__le64(p + 8);
  r->finished_us = pcache__le64(p + 16);
  r->total = pcache__le64(p + 24);
  r->done = pcache__le64(p + 32);
  r->failed = pcache__le64(p + 40);
  return 0;
}

int pcd_replay_record_put(pcd_txn *t, const pcd_replay_record *r) {
  uint8_t k[REC_KEY_SIZE], v[REC_SIZE] = {0};
  v[0] = REC_VERSION;
  v[1] = (uint8_t)r->state;
  pcache__put_le64(v + 8, r->created_us);
  pcache__put_le64(v + 16, r->finished_us);
  pcache__put_le64(v + 24, r->total);
  pcache__put_le64(v + 32, r->done);
  pcache__put_le64(v + 40, r->failed);
  return pcd_db_put(t, t->store->info, k, rec_key(k, r->old_key, r->new_key), v, sizeof v,
                    "put replay record");
}

int pcd_replay_record_get(pcd_txn *t, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                          const uint8_t new_key[PCACHE_DEVKEY_SIZE], pcd_replay_record *ret) {
  uint8_t k[REC_KEY_SIZE];
  MDB_val kv = {rec_key(k, old_key, new_key), k}, v;
  int r = pcd_db_get(t, t->store->info, k, kv.mv_size, &v, "get replay record");
  if (r < 0)
    return r;
  return decode_rec(&kv, &v, ret);
}

struct rec_scan {
  pcd_replay_record_cb cb;
  void *ctx;
};

static int rec_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct rec_scan *s = ctx;
  pcd_replay_record r;
  if (decode_rec(k, v, &r) < 0)
    return 0;
  return s->cb(s->ctx, &r);
}

int pcd_replay_records_foreach(pcd_txn *t, pcd_replay_record_cb cb, void *ctx) {
  struct rec_scan s = {cb, ctx};
  return pcd_db_scan(t, t->store->info, REC_PREFIX, REC_PREFIX_SIZE, rec_kv, &s);
}

/* Bad-pipeline keys collected by a scan, deleted after it (a scan's
 * callback must not write through its cursor's transaction). */
struct key_batch {
  uint8_t keys[64][BAD_KEY_SIZE];
  size_t n;
};

static int collect_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct key_batch *b = ctx;
  (void)v;
  if (k->mv_size != BAD_KEY_SIZE)
    return 0;
  memcpy(b->keys[b->n++], k->mv_data, BAD_KEY_SIZE);
  return b->n == sizeof b->keys / sizeof *b->keys;
}

int pcd_replay_record_delete(pcd_txn *t, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                             const uint8_t new_key[PCACHE_DEVKEY_SIZE]) {
  uint8_t k[REC_KEY_SIZE], prefix[BAD_KEY_SIZE];
  struct key_batch b;
  int r;
  bad_key(prefix, old_key, new_key, NULL);
  do {
    b.n = 0;
    r = pcd_db_scan(t, t->store->info, prefix, BAD_KEY_SIZE - PCACHE_HASH_SIZE, collect_kv, &b);
    if (r < 0)
      return r;
    for (size_t i = 0; i < b.n; i++)
      if ((r = pcd_db_del(t, t->store->info, b.keys[i], BAD_KEY_SIZE, "del replay bad")) < 0)
        return r;
  } while (b.n == sizeof b.keys / sizeof *b.keys);
  return pcd_db_del(t, t->store->info, k, rec_key(k, old_key, new_key), "del replay record");
}

int pcd_replay_bad_put(pcd_txn *t, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                       const uint8_t new_key[PCACHE_DEVKEY_SIZE], const pcache__hash *h,
                       const char *reason) {
  uint8_t k[BAD_KEY_SIZE];
  size_t n = strnlen(reason ? reason : "", PCD_REPLAY_REASON_MAX);
  return pcd_db_put(t, t->store->info, k, bad_key(k, old_key, new_key, h), reason ? reason : "", n,
                    "put replay bad");
}

int pcd_replay_bad_get(pcd_txn *t, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                       const uint8_t new_key[PCACHE_DEVKEY_SIZE], const pcache__hash *h) {
  uint8_t k[BAD_KEY_SIZE];
  MDB_val v;
  return pcd_db_get(t, t->store->info, k, bad_key(k, old_key, new_key, h), &v, "get replay bad");
}

struct bad_scan {
  pcd_replay_bad_cb cb;
  void *ctx;
};

static int bad_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct bad_scan *s = ctx;
  pcache__hash h;
  if (k->mv_size != BAD_KEY_SIZE)
    return 0;
  memcpy(h.bytes, (const uint8_t *)k->mv_data + BAD_KEY_SIZE - PCACHE_HASH_SIZE, PCACHE_HASH_SIZE);
  return s->cb(s->ctx, &h, v->mv_data, v->mv_size);
}

int pcd_replay_bad_foreach(pcd_txn *t, const uint8_t old_key[PCACHE_DEVKEY_SIZE],
                           const uint8_t new_key[PCACHE_DEVKEY_SIZE], pcd_replay_bad_cb cb,
                           void *ctx) {
  uint8_t prefix[BAD_KEY_SIZE];
  struct bad_scan s = {cb, ctx};
  bad_key(prefix, old_key, new_key, NULL);
  return pcd_db_scan(t, t->store->info, prefix, BAD_KEY_SIZE - PCACHE_HASH_SIZE, bad_kv, &s);
}

struct app_scan {
  size_t prefix_len;
  const pcache__hash *after;
  pcd_hash_cb cb;
  void *ctx;
};

static int app_hash_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct app_scan *s = ctx;
  pcache__hash h;
  (void)v;
  if (k->mv_size != s->prefix_len + PCACHE_HASH_SIZE)
    return 0; /* a longer app name that starts with this one's bytes */
  memcpy(h.bytes, (const uint8_t *)k->mv_data + s->prefix_len, PCACHE_HASH_SIZE);
  if (s->after && memcmp(h.bytes, s->after->bytes, PCACHE_HASH_SIZE) <= 0)
    return 0;
  return s->cb(s->ctx, &h);
}

int pcd_app_hashes_after(pcd_txn *t, const uint8_t device_key[PCACHE_DEVKEY_SIZE], const char *app,
                         const pcache__hash *after, pcd_hash_cb cb, void *ctx) {
  uint8_t start[PCACHE_DEVKEY_SIZE + PCD_MAX_APP + 1 + PCACHE_HASH_SIZE];
  size_t n = strnlen(app, PCD_MAX_APP), plen = PCACHE_DEVKEY_SIZE + n + 1;
  struct app_scan s = {plen, after, cb, ctx};
  MDB_cursor *cur;
  MDB_val k, v;
  int rc, r = 0;
  memcpy(start, device_key, PCACHE_DEVKEY_SIZE);
  memcpy(start + PCACHE_DEVKEY_SIZE, app, n);
  start[PCACHE_DEVKEY_SIZE + n] = 0;
  memcpy(start + plen, after ? after->bytes : (const uint8_t[PCACHE_HASH_SIZE]){0},
         PCACHE_HASH_SIZE);
  /* A cursor placed at the key after `after`, not a scan of the whole
   * app: each claim costs what it skips, not what came before. */
  if ((rc = mdb_cursor_open(t->txn, t->store->apps, &cur)))
    return pcd_db_err(t, rc, "cursor");
  k.mv_size = plen + PCACHE_HASH_SIZE;
  k.mv_data = start;
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  while (rc == 0 && k.mv_size >= plen && memcmp(k.mv_data, start, plen) == 0) {
    if ((r = app_hash_kv(&s, &k, &v)))
      break;
    rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
  }
  mdb_cursor_close(cur);
  if (r)
    return r;
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : pcd_db_err(t, rc, "app scan");
}

int pcd_lru_newest_before(pcd_txn *t, const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                          const uint8_t *before, pcd_lru_cb cb, void *ctx) {
  MDB_cursor *cur;
  MDB_val k = {PCD_LRU_KEY_SIZE, (void *)before}, v;
  int rc, r = 0;
  if ((rc = mdb_cursor_open(t->txn, t->store->lru, &cur)))
    return pcd_db_err(t, rc, "cursor");
  if (!before) {
    rc = mdb_cursor_get(cur, &k, &v, MDB_LAST);
  } else {
    /* The first key >= before, then one back: the key before it. */
    rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
    rc = rc == MDB_NOTFOUND ? mdb_cursor_get(cur, &k, &v, MDB_LAST)
                            : (rc ? rc : mdb_cursor_get(cur, &k, &v, MDB_PREV));
    if (rc == 0 && memcmp(k.mv_data, before, PCD_LRU_KEY_SIZE) >= 0)
      rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
  }
  for (; rc == 0; rc = mdb_cursor_get(cur, &k, &v, MDB_PREV)) {
    if (k.mv_size != PCD_LRU_KEY_SIZE ||
        memcmp((const uint8_t *)k.mv_data + 8, device_key, PCACHE_DEVKEY_SIZE) != 0)
      continue;
    if ((r = cb(ctx, k.mv_data)))
      break;
  }
  mdb_cursor_close(cur);
  if (r)
    return r;
  return rc == 0 || rc == MDB_NOTFOUND ? 0 : pcd_db_err(t, rc, "lru scan");
}

/* ------------------------------------------------------------ app_exe */

#define EXE_PREFIX "app_exe" /* with its NUL: 8 bytes */
#define EXE_PREFIX_SIZE (sizeof EXE_PREFIX)
#define EXE_VERSION 1
#define EXE_HEAD 16

int pcd_exe_name_ok(const char *name, size_t len) {
  if (len < 1 || len > PCD_EXE_NAME_MAX || (len == 1 && name[0] == '.') ||
      (len == 2 && name[0] == '.' && name[1] == '.'))
    return 0;
  for (size_t i = 0; i < len; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
          c == '_' || c == '+' || c == '-'))
      return 0;
  }
  return 1;
}

static size_t exe_key(uint8_t *out, const char *app) {
  size_t n = strlen(app);
  memcpy(out, EXE_PREFIX, EXE_PREFIX_SIZE);
  memcpy(out + EXE_PREFIX_SIZE, app, n);
  return EXE_PREFIX_SIZE + n;
}

int pcd_app_exe_put(pcd_txn *t, const char *app, const char *exe, uint64_t now_s) {
  uint8_t k[EXE_PREFIX_SIZE + PCD_MAX_APP], v[EXE_HEAD + PCD_EXE_NAME_MAX] = {0};
  size_t n = strlen(exe);
  if (strlen(app) > PCD_MAX_APP || !pcd_exe_name_ok(exe, n))
    return -EINVAL;
  v[0] = EXE_VERSION;
  pcache__put_le64(v + 8, now_s);
  memcpy(v + EXE_HEAD, exe, n);
  return pcd_db_put(t, t->store->info, k, exe_key(k, app), v, EXE_HEAD + n, "put app_exe");
}

int pcd_app_exe_get(pcd_txn *t, const char *app, char out[PCD_EXE_NAME_MAX + 1]) {
  uint8_t k[EXE_PREFIX_SIZE + PCD_MAX_APP];
  const uint8_t *p;
  MDB_val v;
  size_t n;
  int r;
  out[0] = '\0';
  if (strlen(app) > PCD_MAX_APP)
    return PCACHE_ENOT_FOUND;
  if ((r = pcd_db_get(t, t->store->info, k, exe_key(k, app), &v, "get app_exe")) < 0)
    return r;
  p = v.mv_data;
  n = v.mv_size > EXE_HEAD ? v.mv_size - EXE_HEAD : 0;
  /* Checked again as it is read: the name becomes a file name. */
  if (v.mv_size < EXE_HEAD || p[0] != EXE_VERSION ||
      !pcd_exe_name_ok((const char *)p + EXE_HEAD, n))
    return PCACHE_ENOT_FOUND;
  memcpy(out, p + EXE_HEAD, n);
  out[n] = '\0';
  return 0;
}
