/* LMDB layout (docs/storage.md has the full description):
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
 * info also holds "snap_bytes" u64 (hash list + blob bytes of snapshots).
 * Integers are little-endian except the lru prefix, which is big-endian so
 * LMDB's byte order is time order. */
#include "common/bytes.h"
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/desc_check.h"
#include "common/log.h"
#include "common/paths.h"
#include "private_dir.h"
#include "store_check.h"

#define META_VERSION 1
#define META_SIZE 64
#define DEVICE_VERSION 1
#define DEVICE_SIZE 40
#define LRU_KEY_SIZE (8 + PCD_ENTRY_KEY_SIZE)
#define SNAP_VERSION 1
#define SNAP_SIZE 48
#define SNAP_KEY_MAX (PCACHE_DEVKEY_SIZE + PCD_MAX_APP)
#define PCD_SPARE_TXNS 16

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
  char dir[4096];
};

struct pcd_txn {
  pcd_store *store;
  MDB_txn *txn;
  int err;
  int write;
};

static void put_be64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static int map_err(pcd_txn *t, int rc, const char *what) {
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

/* ------------------------------------------------------------ open / close */

static int open_dbis(pcd_store *s, int *ret_fresh) {
  MDB_txn *txn;
  MDB_val k = {6, "format"}, v;
  int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
  if (rc)
    return rc;
  if ((rc = mdb_dbi_open(txn, "info", MDB_CREATE, &s->info)) ||
      (rc = mdb_dbi_open(txn, "devices", MDB_CREATE, &s->devices)) ||
      (rc = mdb_dbi_open(txn, "entries", MDB_CREATE, &s->entries)) ||
      (rc = mdb_dbi_open(txn, "blobs", MDB_CREATE, &s->blobs)) ||
      (rc = mdb_dbi_open(txn, "descs", MDB_CREATE, &s->descs)) ||
      (rc = mdb_dbi_open(txn, "modules", MDB_CREATE, &s->modules)) ||
      (rc = mdb_dbi_open(txn, "lru", MDB_CREATE, &s->lru)) ||
      (rc = mdb_dbi_open(txn, "apps", MDB_CREATE, &s->apps)) ||
      (rc = mdb_dbi_open(txn, "snapshots", MDB_CREATE, &s->snapshots)) ||
      (rc = mdb_dbi_open(txn, "snapdata", MDB_CREATE, &s->snapdata)))
    goto out_abort;
  rc = mdb_get(txn, s->info, &k, &v);
  if (rc == MDB_NOTFOUND) {
    uint8_t fmt[4], created[8], zero[8] = {0};
    MDB_val fv = {4, fmt}, cv = {8, created}, ck = {7, "created"}, bk = {5, "bytes"},
            bv = {8, zero};
    pcache__put_le32(fmt, PCD_STORE_FORMAT);
    pcache__put_le64(created, (uint64_t)time(NULL));
    if ((rc = mdb_put(txn, s->info, &k, &fv, 0)) || (rc = mdb_put(txn, s->info, &ck, &cv, 0)) ||
        (rc = mdb_put(txn, s->info, &bk, &bv, 0)))
      goto out_abort;
    *ret_fresh = 1;
  } else if (rc) {
    goto out_abort;
  } else if (v.mv_size != 4 || pcache__le32(v.mv_data) != PCD_STORE_FORMAT) {
    rc = MDB_VERSION_MISMATCH;
    log_error("store: %s has format version %u, this pcached knows %u", s->dir,
              v.mv_size == 4 ? pcache__le32(v.mv_data) : 0, PCD_STORE_FORMAT);
    goto out_abort;
  }
  return mdb_txn_commit(txn);

out_abort:
  mdb_txn_abort(txn);
  return rc;
}

static int try_open(pcd_store *s, int *ret_fresh) {
  int rc = mdb_env_create(&s->env);
  if (rc)
    return rc;
  if ((rc = mdb_env_set_maxdbs(s->env, 16)) || (rc = mdb_env_set_mapsize(s->env, s->map_size)) ||
      (rc = mdb_env_set_assert(s->env, pcd_store_on_assert)) ||
      (rc = mdb_env_open(s->env, s->dir, MDB_NOTLS, 0600)) || (rc = open_dbis(s, ret_fresh))) {
    mdb_env_close(s->env);
    s->env = NULL;
    return rc;
  }
  return 0;
}

/* Moves data.mdb aside so a store we cannot trust is never served, and
 * drops the lock file that belonged to it. rename() moves a link itself,
 * never its target. */
static int move_aside(pcd_store *s, const char *why) {
  char from[4200], to[4300], lock[4200];
  snprintf(from, sizeof from, "%s/data.mdb", s->dir);
  snprintf(to, sizeof to, "%s/data.mdb.corrupt-%lld", s->dir, (long long)time(NULL));
  /* Never over an earlier one moved aside in the same second. */
  for (unsigned i = 1; access(to, F_OK) == 0 && i < 1000; i++)
    snprintf(to, sizeof to, "%s/data.mdb.corrupt-%lld.%u", s->dir, (long long)time(NULL), i);
  snprintf(lock, sizeof lock, "%s/lock.mdb", s->dir);
  if (rename(from, to) < 0 && errno != ENOENT) {
    log_error("store: cannot move %s aside: %s", from, strerror(errno));
    return -errno;
  }
  unlink(lock);
  log_warn("store: %s could not be used (%s); moved it to %s and started a fresh store", from,
           why, to);
  return 0;
}

/* Before LMDB maps the store: the files are regular files of ours (LMDB
 * opens them by path, following links), and the store is walked in a
 * child process, so a damaged one is moved aside here instead of faulting
 * or aborting the daemon later, at every restart. Always, not only after
 * an unclean stop: the damage may have come while no daemon ran. */
static int check_before_open(pcd_store *s) {
  char why[600];
  int r = pcd_store_files_check(s->dir, why, sizeof why);
  if (r < 0) {
    log_error("store: cannot open the store files in %s: %s", s->dir, strerror(-r));
    return r;
  }
  if (r == 0) {
    r = pcd_store_check_dir(s->dir, why, sizeof why);
    if (r < 0)
      log_warn("store: could not check %s/data.mdb (%s); opening it unchecked", s->dir,
               strerror(-r));
  }
  if (r <= 0)
    return 0;
  if ((r = move_aside(s, why)) < 0)
    return r;
  r = pcd_store_files_check(s->dir, why, sizeof why);
  return r > 0 ? -EEXIST : r;
}

int pcd_store_open(const char *dir, uint64_t map_size, pcd_store **ret_store) {
  pcd_store *s;
  int fresh = 0, r, rc;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);

  if (strlen(dir) >= sizeof s->dir)
    return -ENAMETOOLONG;
  if ((r = pcd_private_dir(dir, "data directory", "--data-dir")) < 0)
    return r;
  s = pcache__calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  strcpy(s->dir, dir);
  s->map_size = (map_size + page - 1) / page * page;
  if ((r = check_before_open(s)) < 0)
    goto out_free;
  pcd_store_guard_faults();
  rc = try_open(s, &fresh);
  if (rc) {
    r = move_aside(s, mdb_strerror(rc));
    if (r < 0)
      goto out_free;
    rc = try_open(s, &fresh);
    if (rc) {
      log_error("store: cannot open a fresh store in %s: %s", dir, mdb_strerror(rc));
      r = PCACHE_ESTORE;
      goto out_free;
    }
  }
  if (fresh)
    log_info("store: created %s/data.mdb (format %u)", dir, PCD_STORE_FORMAT);
  *ret_store = s;
  return 0;

out_free:
  pcache__free(s);
  return r;
}

int pcd_store_check(pcd_txn *txn, char *why, size_t why_size) {
  int dead, r = pcd_store_check_dir(txn->store->dir, why, why_size);
  /* A child that crashed left its reader slot behind, which would keep
   * pages from reuse until the next start. */
  mdb_reader_check(txn->store->env, &dead);
  return r;
}

void pcd_store_close(pcd_store *store) {
  if (!store)
    return;
  for (int i = 0; i < PCD_SPARE_TXNS; i++) {
    pcd_txn *spare = atomic_exchange(&store->spare[i], NULL);
    if (spare) {
      mdb_txn_abort(spare->txn);
      pcache__free(spare);
    }
  }
  if (store->env)
    mdb_env_close(store->env);
  pcache__free(store);
}

/* ------------------------------------------------------------ transactions */

/* This thread's spare slot, handed out on first use. */
static unsigned spare_slot(void) {
  static atomic_uint next;
  static _Thread_local unsigned slot;
  static _Thread_local int have;
  if (!have) {
    slot = atomic_fetch_add(&next, 1) % PCD_SPARE_TXNS;
    have = 1;
  }
  return slot;
}

int pcd_txn_begin(pcd_store *store, int write, pcd_txn **ret_txn) {
  pcd_txn *t = write ? NULL : atomic_exchange(&store->spare[spare_slot()], NULL);
  int rc;
  if (t) {
    rc = mdb_txn_renew(t->txn);
    if (rc == 0) {
      t->err = 0;
      *ret_txn = t;
      return 0;
    }
    mdb_txn_abort(t->txn);
    pcache__free(t);
  }
  t = pcache__calloc(1, sizeof *t);
  if (!t)
    return -ENOMEM;
  t->store = store;
  t->write = write;
  rc = mdb_txn_begin(store->env, NULL, write ? 0 : MDB_RDONLY, &t->txn);
  if (rc) {
    pcache__free(t);
    return map_err(NULL, rc, "begin");
  }
  *ret_txn = t;
  return 0;
}

int pcd_txn_commit(pcd_txn *txn) {
  int r;
  if (txn->err) {
    r = txn->err;
    mdb_txn_abort(txn->txn);
  } else {
    int rc = mdb_txn_commit(txn->txn);
    r = map_err(NULL, rc, "commit");
    /* LMDB reports a short write of a full disk as EIO: say which it is. */
    if (rc == EIO || rc == ENOSPC) {
      struct statvfs fs;
      if (statvfs(txn->store->dir, &fs) == 0 && fs.f_bavail * fs.f_frsize < (1u << 20))
        log_error("store: the file system holding %s is full (%llu KiB free); writes fail "
                  "until space is freed (pcachectl purge, or a smaller --max-size)",
                  txn->store->dir, (unsigned long long)(fs.f_bavail * fs.f_frsize / 1024));
    }
  }
  pcache__free(txn);
  return r;
}

void pcd_txn_abort(pcd_txn *txn) {
  pcd_txn *none = NULL;
  if (!txn)
    return;
  if (!txn->write) {
    /* Reset drops the snapshot (old pages can be reused by writers) and
     * keeps the reader slot for the renew. */
    mdb_txn_reset(txn->txn);
    if (atomic_compare_exchange_strong(&txn->store->spare[spare_slot()], &none, txn))
      return;
  }
  mdb_txn_abort(txn->txn);
  pcache__free(txn);
}

/* ------------------------------------------------------------------ codecs */

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

static int decode_device(const uint8_t *key, const MDB_val *v, pcd_device *d) {
  const uint8_t *p = v->mv_data;
  if (v->mv_size < DEVICE_SIZE || p[0] != DEVICE_VERSION)
    return PCACHE_ESTORE;
  memcpy(d->key, key, PCACHE_DEVKEY_SIZE);
  d->first_seen = pcache__le64(p + 8);
  d->last_seen = pcache__le64(p + 16);
  d->entries = pcache__le64(p + 24);
  d->bytes = pcache__le64(p + 32);
  d->info = p + DEVICE_SIZE;
  d->info_size = v->mv_size - DEVICE_SIZE;
  return 0;
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

/* ------------------------------------------------------------------- reads */

static int get(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, MDB_val *v,
               const char *what) {
  MDB_val k = {key_size, (void *)key};
  return map_err(t, mdb_get(t->txn, dbi, &k, v), what);
}

int pcd_entry_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], pcd_entry *ret_entry) {
  MDB_val v;
  int r = get(txn, txn->store->entries, key, PCD_ENTRY_KEY_SIZE, &v, "get entry");
  return r < 0 ? r : decode_meta(key, &v, ret_entry);
}

int pcd_blob_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], const uint8_t **ret_blob,
                 size_t *ret_size) {
  MDB_val v;
  int r = get(txn, txn->store->blobs, key, PCD_ENTRY_KEY_SIZE, &v, "get blob");
  if (r < 0)
    return r;
  *ret_blob = v.mv_data;
  *ret_size = v.mv_size;
  return 0;
}

int pcd_desc_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], const uint8_t **ret_desc,
                 size_t *ret_size) {
  MDB_val v;
  int r = get(txn, txn->store->descs, key, PCD_ENTRY_KEY_SIZE, &v, "get desc");
  if (r < 0)
    return r;
  *ret_desc = v.mv_data;
  *ret_size = v.mv_size;
  return 0;
}

int pcd_module_get(pcd_txn *txn, const pcache__hash *hash, const uint8_t **ret_code,
                   size_t *ret_size) {
  MDB_val v;
  int r = get(txn, txn->store->modules, hash->bytes, PCACHE_HASH_SIZE, &v, "get module");
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

int pcd_device_get(pcd_txn *txn, const uint8_t key[PCACHE_DEVKEY_SIZE], pcd_device *ret_device) {
  MDB_val v;
  int r = get(txn, txn->store->devices, key, PCACHE_DEVKEY_SIZE, &v, "get device");
  return r < 0 ? r : decode_device(key, &v, ret_device);
}

static uint64_t db_count(pcd_txn *t, MDB_dbi dbi) {
  MDB_stat st;
  return mdb_stat(t->txn, dbi, &st) ? 0 : st.ms_entries;
}

/* A u64 counter in `info`; 0 when absent (a store from before it). */
static int get_counter(pcd_txn *t, const char *name, uint64_t *ret) {
  MDB_val v;
  int r = get(t, t->store->info, name, strlen(name), &v, name);
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
  int r = get(txn, txn->store->info, "bytes", 5, &v, "get bytes");
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
  r = get(txn, txn->store->info, "snap_bytes", 10, &v, "get snap_bytes");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0 && v.mv_size == 8)
    t.snapshot_bytes = pcache__le64(v.mv_data);
  t.map_size = txn->store->map_size;
  *ret_totals = t;
  return 0;
}

/* Walks dbi from the first key >= prefix while keys start with prefix. */
typedef int (*kv_cb)(void *ctx, const MDB_val *k, const MDB_val *v);

static int scan_prefix(pcd_txn *t, MDB_dbi dbi, const void *prefix, size_t prefix_len, kv_cb cb,
                       void *ctx) {
  MDB_cursor *cur;
  MDB_val k = {prefix_len, (void *)prefix}, v;
  int rc = mdb_cursor_open(t->txn, dbi, &cur), r = 0;
  if (rc)
    return map_err(t, rc, "cursor");
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
  return rc == MDB_NOTFOUND || rc == 0 ? 0 : map_err(t, rc, "scan");
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
  return scan_prefix(txn, txn->store->entries, device_key, device_key ? PCACHE_DEVKEY_SIZE : 0,
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
    return map_err(txn, rc, "cursor");
  /* From the first key >= after_key, skipping after_key itself. */
  for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    if (device_key && (k.mv_size < PCACHE_DEVKEY_SIZE ||
                       memcmp(k.mv_data, device_key, PCACHE_DEVKEY_SIZE) != 0))
      break;
    if ((r = after_kv(&a, &k, &v)) != 0)
      break;
  }
  mdb_cursor_close(cur);
  if (r)
    return r;
  return rc == MDB_NOTFOUND || rc == 0 ? 0 : map_err(txn, rc, "scan");
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
  return scan_prefix(txn, txn->store->apps, prefix, PCACHE_DEVKEY_SIZE + n + 1, app_kv, &s);
}

struct device_scan {
  pcd_device_cb cb;
  void *ctx;
};

static int device_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct device_scan *s = ctx;
  pcd_device d;
  if (k->mv_size != PCACHE_DEVKEY_SIZE || decode_device(k->mv_data, v, &d) < 0)
    return 0;
  return s->cb(s->ctx, &d);
}

int pcd_devices_foreach(pcd_txn *txn, pcd_device_cb cb, void *ctx) {
  struct device_scan s = {cb, ctx};
  return scan_prefix(txn, txn->store->devices, NULL, 0, device_kv, &s);
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
  return scan_prefix(txn, txn->store->modules, NULL, 0, module_kv, &s);
}

int pcd_lru_oldest(pcd_txn *txn, uint8_t ret_key[PCD_ENTRY_KEY_SIZE]) {
  MDB_cursor *cur;
  MDB_val k, v;
  int rc = mdb_cursor_open(txn->txn, txn->store->lru, &cur);
  if (rc)
    return map_err(txn, rc, "cursor");
  rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
  mdb_cursor_close(cur);
  if (rc)
    return map_err(txn, rc, "lru first");
  if (k.mv_size != LRU_KEY_SIZE)
    return PCACHE_ESTORE;
  memcpy(ret_key, (const uint8_t *)k.mv_data + 8, PCD_ENTRY_KEY_SIZE);
  return 0;
}

/* ------------------------------------------------------------------ writes */

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

static int put(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, const void *val,
               size_t val_size, const char *what) {
  MDB_val k = {key_size, (void *)key}, v = {val_size, (void *)val};
  int r = check_before_free(t, dbi, &k, what);
  return r ? r : map_err(t, mdb_put(t->txn, dbi, &k, &v, 0), what);
}

static int del(pcd_txn *t, MDB_dbi dbi, const void *key, size_t key_size, const char *what) {
  MDB_val k = {key_size, (void *)key};
  int r = check_before_free(t, dbi, &k, what);
  if (r == 0)
    r = map_err(t, mdb_del(t->txn, dbi, &k, NULL), what);
  return r == PCACHE_ENOT_FOUND ? 0 : r;
}

/* Adds delta to a u64 counter in `info` (never below 0). */
static int add_counter(pcd_txn *t, const char *name, int64_t delta) {
  MDB_val v;
  uint8_t buf[8];
  uint64_t cur = 0;
  int r = get(t, t->store->info, name, strlen(name), &v, name);
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0 && v.mv_size == 8)
    cur = pcache__le64(v.mv_data);
  cur = delta < 0 && (uint64_t)-delta > cur ? 0 : cur + (uint64_t)delta;
  pcache__put_le64(buf, cur);
  return put(t, t->store->info, name, strlen(name), buf, 8, name);
}

static int add_bytes(pcd_txn *t, int64_t delta) { return add_counter(t, "bytes", delta); }

/* Deletes a device record with no entries and no snapshots: nothing of it
 * is left to serve, and records of devices long gone would otherwise fill
 * the store (they count against --max-size). 0 when it is still used. */
static int device_drop_if_unused(pcd_txn *t, const uint8_t *devkey) {
  MDB_val v, k = {PCACHE_DEVKEY_SIZE, (void *)devkey};
  MDB_cursor *cur;
  int64_t bytes;
  int r = get(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, &v, "get device"), rc;
  if (r < 0)
    return r == PCACHE_ENOT_FOUND ? 0 : r;
  if (v.mv_size >= DEVICE_SIZE && pcache__le64((const uint8_t *)v.mv_data + 24) != 0)
    return 0;
  bytes = (int64_t)(PCACHE_DEVKEY_SIZE + v.mv_size);
  if ((rc = mdb_cursor_open(t->txn, t->store->snapshots, &cur)) != 0)
    return map_err(t, rc, "cursor");
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  r = rc == 0 && k.mv_size >= PCACHE_DEVKEY_SIZE && memcmp(k.mv_data, devkey, PCACHE_DEVKEY_SIZE) == 0;
  mdb_cursor_close(cur);
  if (rc != 0 && rc != MDB_NOTFOUND)
    return map_err(t, rc, "snapshot seek");
  if (r)
    return 0;
  if ((r = del(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, "delete device")) < 0)
    return r;
  return add_counter(t, "device_bytes", -bytes);
}

static int device_add(pcd_txn *t, const uint8_t *devkey, int64_t entries, int64_t bytes) {
  MDB_val v;
  uint8_t *buf;
  uint64_t e, b;
  int r = get(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, &v, "get device");
  if (r == PCACHE_ENOT_FOUND)
    return 0;
  if (r < 0)
    return r;
  if (v.mv_size < DEVICE_SIZE)
    return PCACHE_ESTORE;
  buf = pcache__malloc(v.mv_size);
  if (!buf)
    return -ENOMEM;
  memcpy(buf, v.mv_data, v.mv_size);
  e = pcache__le64(buf + 24);
  b = pcache__le64(buf + 32);
  e = entries < 0 && (uint64_t)-entries > e ? 0 : e + (uint64_t)entries;
  b = bytes < 0 && (uint64_t)-bytes > b ? 0 : b + (uint64_t)bytes;
  pcache__put_le64(buf + 24, e);
  pcache__put_le64(buf + 32, b);
  r = put(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, buf, v.mv_size, "put device");
  pcache__free(buf);
  if (r == 0 && e == 0)
    r = device_drop_if_unused(t, devkey);
  return r;
}

/* Copies at most PCD_MAX_DEVICE_STRING bytes of s into out, cut at a
 * UTF-8 character boundary. */
static char *bounded_string(const char *s, char out[PCD_MAX_DEVICE_STRING + 1]) {
  size_t n = s ? strnlen(s, PCD_MAX_DEVICE_STRING + 1) : 0;
  if (n > PCD_MAX_DEVICE_STRING) {
    n = PCD_MAX_DEVICE_STRING;
    while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
      n--;
  }
  if (n)
    memcpy(out, s, n);
  out[n] = '\0';
  return out;
}

int pcd_device_touch(pcd_txn *txn, const Pcachepb__DeviceInfo *client_info, uint64_t now_s) {
  char name[PCD_MAX_DEVICE_STRING + 1], driver_name[PCD_MAX_DEVICE_STRING + 1],
      driver_info[PCD_MAX_DEVICE_STRING + 1];
  Pcachepb__DeviceInfo bounded = PCACHEPB__DEVICE_INFO__INIT, *info = &bounded;
  MDB_val v;
  uint8_t *buf;
  size_t n;
  uint64_t first = now_s, entries = 0, bytes = 0;
  int64_t old_size = 0;
  int r;
  if (client_info->key.len != PCACHE_DEVKEY_SIZE)
    return PCACHE_EBAD_KEY;
  /* The record keeps what Vulkan reports (its strings are at most 255
   * bytes) and nothing else: the client's strings are cut there and
   * fields this daemon does not know are dropped, so a record is small
   * and bounded whatever a client sends. */
  bounded.key = client_info->key;
  bounded.driver_id = client_info->driver_id;
  bounded.api_version = client_info->api_version;
  bounded.name = bounded_string(client_info->name, name);
  bounded.driver_name = bounded_string(client_info->driver_name, driver_name);
  bounded.driver_info = bounded_string(client_info->driver_info, driver_info);
  n = pcachepb__device_info__get_packed_size(info);
  r = get(txn, txn->store->devices, info->key.data, PCACHE_DEVKEY_SIZE, &v, "get device");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0)
    old_size = (int64_t)(PCACHE_DEVKEY_SIZE + v.mv_size);
  if (r == 0 && v.mv_size >= DEVICE_SIZE) {
    const uint8_t *p = v.mv_data;
    first = pcache__le64(p + 8);
    entries = pcache__le64(p + 24);
    bytes = pcache__le64(p + 32);
  }
  buf = pcache__malloc(DEVICE_SIZE + n);
  if (!buf)
    return -ENOMEM;
  memset(buf, 0, DEVICE_SIZE);
  buf[0] = DEVICE_VERSION;
  pcache__put_le64(buf + 8, first);
  pcache__put_le64(buf + 16, now_s);
  pcache__put_le64(buf + 24, entries);
  pcache__put_le64(buf + 32, bytes);
  pcachepb__device_info__pack(info, buf + DEVICE_SIZE);
  r = put(txn, txn->store->devices, info->key.data, PCACHE_DEVKEY_SIZE, buf, DEVICE_SIZE + n,
          "put device");
  pcache__free(buf);
  if (r == 0)
    r = add_counter(txn, "device_bytes",
                    (int64_t)(PCACHE_DEVKEY_SIZE + DEVICE_SIZE + n) - old_size);
  return r;
}

int pcd_device_forget(pcd_txn *txn, const uint8_t key[PCACHE_DEVKEY_SIZE]) {
  return device_drop_if_unused(txn, key);
}

int pcd_module_ref(pcd_txn *txn, const pcache__hash *hash, const void *code, size_t size) {
  MDB_val v;
  uint8_t *buf;
  int is_new, r = get(txn, txn->store->modules, hash->bytes, PCACHE_HASH_SIZE, &v, "get module");
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
  r = put(txn, txn->store->modules, hash->bytes, PCACHE_HASH_SIZE, buf, 4 + size, "put module");
  pcache__free(buf);
  /* A module counts against --max-size once, while anything names it. */
  if (r == 0 && is_new)
    r = add_counter(txn, "module_bytes", (int64_t)(PCACHE_HASH_SIZE + 4 + size));
  return r;
}

static int module_unref(pcd_txn *t, const pcache__hash *hash) {
  MDB_val v;
  uint32_t refs;
  int r = get(t, t->store->modules, hash->bytes, PCACHE_HASH_SIZE, &v, "get module");
  if (r == PCACHE_ENOT_FOUND)
    return 0;
  if (r < 0)
    return r;
  refs = v.mv_size < 4 ? 0 : pcache__le32(v.mv_data);
  if (refs <= 1) {
    int64_t bytes = (int64_t)(PCACHE_HASH_SIZE + v.mv_size);
    if ((r = del(t, t->store->modules, hash->bytes, PCACHE_HASH_SIZE, "del module")) < 0)
      return r;
    return add_counter(t, "module_bytes", -bytes);
  }
  /* Rewrite in place: LMDB values are read-only, so copy. */
  {
    uint8_t *buf = pcache__malloc(v.mv_size);
    if (!buf)
      return -ENOMEM;
    memcpy(buf, v.mv_data, v.mv_size);
    pcache__put_le32(buf, refs - 1);
    r = put(t, t->store->modules, hash->bytes, PCACHE_HASH_SIZE, buf, v.mv_size, "put module");
    pcache__free(buf);
  }
  return r;
}

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
    if ((r = module_unref(t, &mods[i])) < 0)
      return r;
  return 0;
}

static int delete_indexes(pcd_txn *t, const pcd_entry *e) {
  uint8_t lk[LRU_KEY_SIZE], ak[PCACHE_DEVKEY_SIZE + PCD_MAX_APP + 1 + PCACHE_HASH_SIZE];
  int r = del(t, t->store->lru, lk, lru_key(lk, e->last_used_us, e->key), "del lru");
  if (r < 0)
    return r;
  return del(t, t->store->apps, ak, app_key(ak, e->key, e->app), "del app");
}

uint64_t pcd_entry_index_cost(size_t app_len) {
  return PCD_ENTRY_KEY_SIZE + META_SIZE + app_len               /* entries */
         + LRU_KEY_SIZE                                         /* lru */
         + PCACHE_DEVKEY_SIZE + app_len + 1 + PCACHE_HASH_SIZE; /* apps */
}

static int64_t index_cost_of(const pcd_entry *e) {
  return (int64_t)pcd_entry_index_cost(strnlen(e->app, PCD_MAX_APP));
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
    if ((r = unref_desc_modules(txn, entry->key)) < 0 || (r = delete_indexes(txn, &old)) < 0)
      return r;
  }
  if ((r = put(txn, txn->store->blobs, e.key, PCD_ENTRY_KEY_SIZE, blob, e.blob_size, "put blob")) <
          0 ||
      (r = put(txn, txn->store->descs, e.key, PCD_ENTRY_KEY_SIZE, desc, e.desc_size, "put desc")) <
          0 ||
      (r = put(txn, txn->store->entries, e.key, PCD_ENTRY_KEY_SIZE, meta, encode_meta(&e, meta),
               "put entry")) < 0 ||
      (r = put(txn, txn->store->lru, lk, lru_key(lk, e.last_used_us, e.key), "", 0, "put lru")) <
          0 ||
      (r = put(txn, txn->store->apps, ak, app_key(ak, e.key, e.app), "", 0, "put app")) < 0)
    return r;
  r = add_bytes(txn, (int64_t)(e.blob_size + e.desc_size) - old_bytes);
  if (r == 0)
    r = add_counter(txn, "index_bytes", index_cost_of(&e) - (had ? index_cost_of(&old) : 0));
  if (r < 0)
    return r;
  return device_add(txn, e.key, 1 - had, (int64_t)(e.blob_size + e.desc_size) - old_bytes);
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
  if ((r = unref_desc_modules(txn, key)) < 0 || (r = delete_indexes(txn, &e)) < 0 ||
      (r = del(txn, txn->store->blobs, key, PCD_ENTRY_KEY_SIZE, "del blob")) < 0 ||
      (r = del(txn, txn->store->descs, key, PCD_ENTRY_KEY_SIZE, "del desc")) < 0 ||
      (r = del(txn, txn->store->entries, key, PCD_ENTRY_KEY_SIZE, "del entry")) < 0 ||
      (r = add_bytes(txn, -(int64_t)bytes)) < 0 ||
      (r = add_counter(txn, "index_bytes", -index_cost_of(&e))) < 0 ||
      (r = device_add(txn, key, -1, -(int64_t)bytes)) < 0)
    return r;
  if (ret_bytes)
    *ret_bytes = bytes;
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
    if ((r = del(txn, txn->store->lru, lk, lru_key(lk, e.last_used_us, key), "del lru")) < 0)
      return r;
    e.last_used_us = last_used_us;
    if ((r = put(txn, txn->store->lru, lk, lru_key(lk, e.last_used_us, key), "", 0, "put lru")) <
        0)
      return r;
  }
  e.hits += hits;
  return put(txn, txn->store->entries, key, PCD_ENTRY_KEY_SIZE, meta, encode_meta(&e, meta),
             "put entry");
}

/* -------------------------------------------------------------- snapshots */

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
  int r = get(txn, txn->store->snapshots, key, k.mv_size, &v, "get snapshot");
  if (r < 0)
    return r;
  if ((r = decode_snap(&k, &v, ret_snapshot)) < 0)
    return r;
  if (!ret_hashes && !ret_blob)
    return 0;
  r = get(txn, txn->store->snapdata, key, k.mv_size, &d, "get snapshot data");
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
  return scan_prefix(txn, txn->store->snapshots, device_key, device_key ? PCACHE_DEVKEY_SIZE : 0,
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

static int add_snap_bytes(pcd_txn *t, int64_t delta) {
  return add_counter(t, "snap_bytes", delta);
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
  memset(meta, 0, sizeof meta);
  meta[0] = SNAP_VERSION;
  pcache__put_le64(meta + 8, snapshot->blob_size);
  pcache__put_le64(meta + 16, snapshot->n_hashes);
  pcache__put_le64(meta + 24, snapshot->checksum);
  pcache__put_le64(meta + 32, snapshot->created_us);
  /* MDB_RESERVE: the hash list and the blob are copied once, straight
   * into the page, with no buffer to join them. */
  r = map_err(txn, mdb_put(txn->txn, txn->store->snapdata, &k, &v, MDB_RESERVE), "put snapdata");
  if (r < 0)
    return r;
  if (hash_bytes)
    memcpy(v.mv_data, hashes, hash_bytes);
  if (snapshot->blob_size)
    memcpy((uint8_t *)v.mv_data + hash_bytes, blob, snapshot->blob_size);
  if ((r = put(txn, txn->store->snapshots, key, key_size, meta, SNAP_SIZE, "put snapshot")) < 0 ||
      (r = add_counter(txn, "index_bytes", (int64_t)(2 * key_size + SNAP_SIZE))) < 0)
    return r;
  return add_snap_bytes(txn, (int64_t)(hash_bytes + snapshot->blob_size));
}

int pcd_snapshot_delete(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                        const char *app, uint64_t *ret_bytes) {
  uint8_t key[SNAP_KEY_MAX];
  size_t key_size = snap_key(key, device_key, app);
  MDB_val v;
  uint64_t bytes = 0;
  int r = get(txn, txn->store->snapdata, key, key_size, &v, "get snapshot data"), found = r == 0;
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (found)
    bytes = v.mv_size;
  r = get(txn, txn->store->snapshots, key, key_size, &v, "get snapshot");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  found |= r == 0;
  if (!found)
    return PCACHE_ENOT_FOUND;
  if ((r = del(txn, txn->store->snapdata, key, key_size, "del snapdata")) < 0 ||
      (r = del(txn, txn->store->snapshots, key, key_size, "del snapshot")) < 0 ||
      (r = add_snap_bytes(txn, -(int64_t)bytes)) < 0 ||
      (r = add_counter(txn, "index_bytes", -(int64_t)(2 * key_size + SNAP_SIZE))) < 0 ||
      (r = device_drop_if_unused(txn, device_key)) < 0)
    return r;
  if (ret_bytes)
    *ret_bytes = bytes;
  return 0;
}

/* ------------------------------------------------------ size accounting */

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
  int r = get(t, t->store->info, name, strlen(name), &v, name);
  if (r != PCACHE_ENOT_FOUND)
    return r;
  for (size_t i = 0; i < n; i++)
    if ((r = scan_prefix(t, sources[i].dbi, NULL, 0,
                         sources[i].keys_only ? recount_key : recount_kv, &c)) < 0)
      return r;
  pcache__put_le64(buf, c.bytes);
  *ret_done = 1;
  return put(t, t->store->info, name, strlen(name), buf, 8, name);
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

int pcd_store_nudge(pcd_store *store) {
  pcd_txn *t;
  uint8_t fmt[4];
  int r = pcd_txn_begin(store, 1, &t);
  if (r < 0)
    return r;
  pcache__put_le32(fmt, PCD_STORE_FORMAT);
  if ((r = put(t, store->info, "format", 6, fmt, 4, "format")) < 0) {
    pcd_txn_abort(t);
    return r;
  }
  return pcd_txn_commit(t);
}
