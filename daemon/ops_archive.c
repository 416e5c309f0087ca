/* Export and Import: the store <-> the portable archive (common/archive.h).
 * Import validates every entry with pcd_item_store, exactly as Put does. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/archive.h"
#include "common/desc_check.h"
#include "common/log.h"
#include "ops.h"

/* ------------------------------------------------------------------ export */

typedef struct exportctx {
  pcd_txn *txn;
  const char *app;
  pcd_entry *entries;
  size_t n, cap;
  pcache_hash128 *mods;
  size_t n_mods, cap_mods;
  int err;
} exportctx;

static int add_mod(exportctx *x, const pcache_hash128 *h) {
  for (size_t i = 0; i < x->n_mods; i++)
    if (pcache__hash_equal(&x->mods[i], h))
      return 0;
  if (x->n_mods == x->cap_mods) {
    size_t cap = x->cap_mods ? x->cap_mods * 2 : 32;
    pcache_hash128 *m = pcache__realloc(x->mods, cap * sizeof *m);
    if (!m)
      return -ENOMEM;
    x->mods = m;
    x->cap_mods = cap;
  }
  x->mods[x->n_mods++] = *h;
  return 0;
}

static int exportvisit(void *ctx, const pcd_entry *e) {
  exportctx *x = ctx;
  pcache_hash128 sh, mods[PCACHE_DESC_MAX_MODULES];
  const uint8_t *desc;
  size_t size, n = 0;
  if (x->app && *x->app && strcmp(e->app, x->app) != 0)
    return 0;
  if (x->n == x->cap) {
    size_t cap = x->cap ? x->cap * 2 : 64;
    pcd_entry *v = pcache__realloc(x->entries, cap * sizeof *v);
    if (!v)
      return -ENOMEM;
    x->entries = v;
    x->cap = cap;
  }
  x->entries[x->n++] = *e;
  memcpy(sh.bytes, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  if (pcd_desc_get(x->txn, e->key, &desc, &size) == 0 &&
      pcache__desc_check(desc, size, &sh, 0, mods, &n) == 0) {
    for (size_t i = 0; i < n; i++)
      if (add_mod(x, &mods[i]) < 0)
        return -ENOMEM;
  }
  return 0;
}

static int exportdevice(void *ctx, const pcd_device *d) {
  void **pair = ctx;
  pcache_archive_writer *w = pair[0];
  const uint8_t *filter = pair[1];
  Pcachepb__DeviceInfo *info;
  int r;
  if (filter && memcmp(filter, d->key, PCACHE_DEVKEY_SIZE) != 0)
    return 0;
  info = pcachepb__device_info__unpack(&pcache__pb_allocator, d->info_size, d->info);
  if (!info)
    return 0;
  r = pcache__archive_add_device(w, info);
  pcachepb__device_info__free_unpacked(info, &pcache__pb_allocator);
  return r;
}

int pcd_ops_export(pcd_txn *txn, pcd_job *job) {
  const Pcachepb__Export *req = job->req->export;
  Pcachepb__ExportReply *reply = pcd_arena_alloc(&job->arena, sizeof *reply);
  exportctx x = {.txn = txn, .app = req->app};
  pcache_archive_writer *w = NULL;
  const uint8_t *dev = NULL;
  void *pair[2];
  uint8_t *data = NULL;
  size_t size = 0;
  int r;

  if (!reply)
    return -ENOMEM;
  pcachepb__export_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_EXPORT;
  job->resp.export = reply;
  if (req->device_key.len) {
    if (req->device_key.len != PCACHE_DEVKEY_SIZE) {
      job->resp.status = PCACHE_EBAD_KEY;
      job->resp.message = pcd_arena_strdup(&job->arena, "device key is not 32 bytes");
      return 0;
    }
    dev = req->device_key.data;
  }
  if ((r = pcd_entries_foreach(txn, dev, exportvisit, &x)) < 0)
    goto out_free;
  if ((r = pcache__archive_writer_new(&w)) < 0)
    goto out_free;
  pair[0] = w;
  pair[1] = (void *)dev;
  if ((r = pcd_devices_foreach(txn, exportdevice, pair)) < 0)
    goto out_free;
  for (size_t i = 0; i < x.n_mods; i++) {
    const uint8_t *code;
    size_t code_size;
    if (pcd_module_get(txn, &x.mods[i], &code, &code_size) < 0)
      continue;
    if ((r = pcache__archive_add_module(w, &x.mods[i], code, code_size)) < 0)
      goto out_free;
  }
  for (size_t i = 0; i < x.n; i++) {
    const pcd_entry *e = &x.entries[i];
    pcache_archive_entry ae;
    memset(&ae, 0, sizeof ae);
    memcpy(ae.device_key.bytes, e->key, PCACHE_DEVKEY_SIZE);
    memcpy(ae.state_hash.bytes, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
    ae.kind = e->kind;
    ae.app = e->app;
    if (pcd_blob_get(txn, e->key, &ae.blob, &ae.blob_size) < 0 ||
        pcd_desc_get(txn, e->key, &ae.desc, &ae.desc_size) < 0)
      continue;
    /* A blob that fails its checksum is not exported; Verify reports it. */
    if (pcache__checksum64(ae.blob, ae.blob_size) != e->checksum)
      continue;
    ae.checksum = e->checksum;
    ae.created = e->created_us / 1000000;
    ae.last_used = e->last_used_us / 1000000;
    ae.hits = e->hits;
    ae.compile_ns = e->compile_ns;
    if ((r = pcache__archive_add_entry(w, &ae)) < 0)
      goto out_free;
    reply->entries++;
  }
  if ((r = pcache__archive_finish(w, &data, &size)) < 0)
    goto out_free;
  /* The archive is handed to the arena's owner through a copy so that one
   * free releases everything with the reply. */
  reply->archive.data = pcd_arena_memdup(&job->arena, data, size);
  reply->archive.len = size;
  reply->archive_size = size;
  pcache__free(data);
  r = reply->archive.data ? 0 : -ENOMEM;
  log_info("export: %llu entries, %zu bytes", (unsigned long long)reply->entries, size);
out_free:
  pcache__archive_writer_free(w);
  pcache__free(x.entries);
  pcache__free(x.mods);
  if (r < 0 && r != -ENOMEM && r != PCACHE_EFULL && r != PCACHE_ESTORE) {
    job->resp.status = r;
    job->resp.message = pcd_arena_strdup(&job->arena, pcache_strerror(r));
    r = 0;
  }
  return r;
}

/* ------------------------------------------------------------------ import */

typedef struct importmod {
  pcache_hash128 hash;
  void *code;
  size_t size;
} importmod;

typedef struct importctx {
  pcd_txn *txn;
  const pcd_config *config;
  pcd_job *job;
  Pcachepb__ImportReply *reply;
  size_t cap;
  importmod *mods;
  size_t n_mods;
  uint64_t now_us;
  int fatal;
} importctx;

static int find_mod(void *ctx, const pcache_hash128 *hash, const void **code, size_t *size) {
  importctx *x = ctx;
  for (size_t i = 0; i < x->n_mods; i++) {
    if (pcache__hash_equal(&x->mods[i].hash, hash)) {
      /* Archive modules are checked like Put modules: by their hash. */
      pcache_hash128 h;
      pcache__hash128(x->mods[i].code, x->mods[i].size, &h);
      if (!pcache__hash_equal(&h, hash))
        return -1;
      *code = x->mods[i].code;
      *size = x->mods[i].size;
      return 0;
    }
  }
  return -1;
}

static int add_problem(importctx *x, const uint8_t *dev, const uint8_t *sh, int st,
                       const char *msg) {
  pcd_arena *a = &x->job->arena;
  Pcachepb__Problem *p = pcd_arena_alloc(a, sizeof *p);
  if (x->reply->n_problems == x->cap) {
    Pcachepb__Problem **np;
    x->cap = x->cap ? x->cap * 2 : 16;
    np = pcd_arena_alloc(a, x->cap * sizeof *np);
    if (!np)
      return -ENOMEM;
    if (x->reply->n_problems)
      memcpy(np, x->reply->problems, x->reply->n_problems * sizeof *np);
    x->reply->problems = np;
  }
  if (!p)
    return -ENOMEM;
  pcachepb__problem__init(p);
  if (dev) {
    p->device_key.data = pcd_arena_memdup(a, dev, PCACHE_DEVKEY_SIZE);
    p->device_key.len = PCACHE_DEVKEY_SIZE;
  }
  if (sh) {
    p->state_hash.data = pcd_arena_memdup(a, sh, PCACHE_HASH_SIZE);
    p->state_hash.len = PCACHE_HASH_SIZE;
  }
  p->status = st;
  p->message = pcd_arena_strdup(a, msg ? msg : pcache_strerror(st));
  x->reply->problems[x->reply->n_problems++] = p;
  x->reply->refused++;
  return 0;
}

static int importdevice(void *ctx, const Pcachepb__DeviceInfo *info) {
  importctx *x = ctx;
  int r;
  if (info->key.len != PCACHE_DEVKEY_SIZE)
    return add_problem(x, NULL, NULL, PCACHE_EBAD_KEY, "device record with a bad key");
  r = pcd_device_touch(x->txn, info, x->now_us / 1000000);
  return r < 0 ? (x->fatal = r) : 0;
}

static int importmodule(void *ctx, const pcache_hash128 *hash, const void *code, size_t size) {
  importctx *x = ctx;
  importmod *m = pcache__realloc(x->mods, (x->n_mods + 1) * sizeof *m);
  if (!m)
    return x->fatal = -ENOMEM;
  x->mods = m;
  m[x->n_mods].hash = *hash;
  m[x->n_mods].code = pcache__malloc(size ? size : 1);
  if (!m[x->n_mods].code)
    return x->fatal = -ENOMEM;
  memcpy(m[x->n_mods].code, code, size);
  m[x->n_mods].size = size;
  x->n_mods++;
  return 0;
}

/* An archive's time (unix seconds) in microseconds, clamped to now: 0 (not
 * recorded) and times in the future are now, so that an archive cannot
 * pin its entries ahead of every fresh one in the LRU (nor overflow the
 * conversion). */
static uint64_t archive_time_us(uint64_t s, uint64_t now_us) {
  return s == 0 || s >= now_us / 1000000 ? now_us : s * 1000000;
}

static int importentry(void *ctx, const pcache_archive_entry *e) {
  importctx *x = ctx;
  pcd_device d;
  pcd_item item = {
      .state_hash = e->state_hash.bytes,
      .state_hash_len = PCACHE_HASH_SIZE,
      .kind = e->kind,
      .blob = e->blob,
      .blob_size = e->blob_size,
      .desc = e->desc,
      .desc_size = e->desc_size,
      .find_module = find_mod,
      .find_ctx = x,
      .app = e->app,
      .compile_ns = e->compile_ns,
      .created_us = archive_time_us(e->created, x->now_us),
      .last_used_us = archive_time_us(e->last_used, x->now_us),
      .hits = e->hits,
  };
  char *msg = NULL;
  int st = 0, r;
  if (e->app && strlen(e->app) > PCD_MAX_APP)
    return add_problem(x, e->device_key.bytes, e->state_hash.bytes, PCACHE_EBAD_SIZE,
                       "app name too long");
  if (e->blob_size && pcache__checksum64(e->blob, e->blob_size) != e->checksum)
    return add_problem(x, e->device_key.bytes, e->state_hash.bytes, PCACHE_ECHECKSUM, NULL);
  /* An entry whose device record was not in the archive still gets one,
   * made first so its counters include the entry. */
  int new_device = pcd_device_get(x->txn, e->device_key.bytes, &d) == PCACHE_ENOT_FOUND;
  if (new_device) {
    Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
    info.key.data = (uint8_t *)e->device_key.bytes;
    info.key.len = PCACHE_DEVKEY_SIZE;
    if ((r = pcd_device_touch(x->txn, &info, x->now_us / 1000000)) < 0)
      return x->fatal = r;
  }
  r = pcd_item_store(x->txn, &e->device_key, &item, x->config->max_blob, &x->job->arena, &st,
                     &msg);
  if (r < 0)
    return x->fatal = r;
  if (st < 0) {
    /* A refused entry leaves no device record behind it. */
    if (new_device && (r = pcd_device_forget(x->txn, e->device_key.bytes)) < 0)
      return x->fatal = r;
    return add_problem(x, e->device_key.bytes, e->state_hash.bytes, st, msg);
  }
  x->reply->accepted++;
  x->job->stored++;
  return 0;
}

static int importbad(void *ctx, uint64_t index, int err) {
  importctx *x = ctx;
  char msg[96];
  snprintf(msg, sizeof msg, "record %llu: %s", (unsigned long long)index, pcache_strerror(err));
  return add_problem(x, NULL, NULL, err, msg);
}

int pcd_ops_import(pcd_txn *txn, const pcd_config *config, pcd_job *job) {
  const Pcachepb__Import *req = job->req->import;
  Pcachepb__ImportReply *reply = pcd_arena_alloc(&job->arena, sizeof *reply);
  importctx x = {.txn = txn, .config = config, .job = job, .reply = reply,
                  .now_us = pcd_now_us()};
  pcache_archive_visitor v = {importdevice, importmodule, importentry, importbad};
  int r;
  if (!reply)
    return -ENOMEM;
  pcachepb__import_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_IMPORT;
  job->resp.import = reply;
  r = pcache__archive_read(req->archive.data, req->archive.len, &v, &x);
  for (size_t i = 0; i < x.n_mods; i++)
    pcache__free(x.mods[i].code);
  pcache__free(x.mods);
  if (x.fatal)
    return x.fatal;
  if (r < 0) {
    job->resp.status = r;
    job->resp.message = pcd_arena_printf(&job->arena, "%s (%llu entries imported before it)",
                                         pcache_strerror(r),
                                         (unsigned long long)reply->accepted);
    if (r == -ENOMEM)
      return r;
  }
  if (reply->accepted) {
    uint64_t n = 0;
    if ((r = pcd_evict(txn, config->max_size, &n, NULL)) < 0)
      return r;
    job->evicted = n;
  }
  log_info("import: %llu accepted, %llu refused", (unsigned long long)reply->accepted,
           (unsigned long long)reply->refused);
  return 0;
}
