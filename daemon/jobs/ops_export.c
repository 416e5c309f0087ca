/* Export: the store (or one device's or app's part of it) into a portable
 * archive (proto/archive.h), streamed into a memfd in slices. */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "app_set.h"
#include "bulk.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/vec.h"
#include "ops.h"
#include "pos_index.h"
#include "proto/archive.h"
#include "proto/desc_check.h"

/* Export streams the archive into a memfd, record by record, and walks
 * the entries in slices of EXPORT_SLICE entries, each in a read
 * transaction of its own that the writer runs between batches: the heap
 * holds one record and the set of modules written, never the archive
 * (it took twice the store before), and other clients' writes commit
 * between slices. The memfd becomes the bulk reply. */
#define EXPORT_SLICE 2048

typedef struct exportstate {
  int fd;
  pcache__archive_writer *w;
  uint8_t last[PCD_ENTRY_KEY_SIZE]; /* the last entry walked */
  int have_last, finished;
  pcache__hash *mods; /* modules written, so each goes once */
  size_t n_mods, cap_mods;
  pcd_pos_index index;
  /* The apps the exported entries name: their program names go in at the
   * end (export_programs). */
  pcd_app_set apps;
  uint64_t entries, entry_bytes, size; /* entry_bytes: pcd_entry_size summed */
} exportstate;

typedef struct exportctx {
  pcd_txn *txn;
  const char *app;
  exportstate *st;
  size_t walked;
} exportctx;

static uint64_t exp_hash_at(const void *ctx, size_t pos) {
  return pcd_module_hash_key(&((const exportstate *)ctx)->mods[pos]);
}

struct exp_probe {
  const exportstate *st;
  const pcache__hash *hash;
};

static int exp_mod_at(const void *ctx, size_t pos) {
  const struct exp_probe *p = ctx;
  return pcache__hash_equal(&p->st->mods[pos], p->hash);
}

/* Writes module h unless it went already. */
static int export_module(exportctx *x, const pcache__hash *h) {
  exportstate *st = x->st;
  struct exp_probe p = {st, h};
  const uint8_t *code;
  size_t code_size;
  int r;
  if (pcd_pos_index_find(&st->index, pcd_module_hash_key(h), exp_mod_at, &p) >= 0)
    return 0;
  if (pcd_module_get(x->txn, h, &code, &code_size) < 0)
    return 0; /* Verify reports what is missing */
  if ((r = pcache__archive_add_module(st->w, h, code, code_size)) < 0)
    return r;
  if (pcache__vec_reserve((void **)&st->mods, &st->cap_mods, st->n_mods + 1, sizeof *st->mods, 16) <
      0)
    return -ENOMEM;
  st->mods[st->n_mods] = *h;
  if (pcd_pos_index_add(&st->index, pcd_module_hash_key(h), st->n_mods, exp_hash_at, st) < 0)
    return -ENOMEM;
  st->n_mods++;
  return 0;
}

/* Program records for the apps exported whose program name this store
 * knows, so that a store filled from the archive builds under that name
 * too (docs/replay.md "Builds under the program's name"). */
static int export_programs(pcd_txn *txn, exportstate *st) {
  char exe[PCD_EXE_NAME_MAX + 1];
  int r;
  for (size_t i = 0; i < st->apps.n; i++) {
    r = pcd_app_exe_get(txn, st->apps.apps[i], exe);
    if (r == PCACHE_ENOT_FOUND)
      continue;
    if (r < 0 || (r = pcache__archive_add_program(st->w, st->apps.apps[i], exe)) < 0)
      return r;
  }
  return 0;
}

/* Staged items (docs/replay.md "Staged builds") are this daemon's work
 * in progress, never a device's pipelines: an archive carries what they
 * become once built, under the device's key. */
static int is_staged(const uint8_t *key) {
  pcache__devkey k;
  memcpy(k.bytes, key, PCACHE_DEVKEY_SIZE);
  return pcache__devkey_is_staged(&k);
}

static int exportvisit(void *ctx, const pcd_entry *e) {
  exportctx *x = ctx;
  exportstate *st = x->st;
  pcache__hash sh, mods[PCACHE_DESC_MAX_MODULES];
  pcache__archive_entry ae;
  size_t n = 0;
  int r;
  memcpy(st->last, e->key, PCD_ENTRY_KEY_SIZE);
  st->have_last = 1;
  if (++x->walked >= EXPORT_SLICE)
    r = PCD_SLICE_PAUSE; /* after this one */
  else
    r = 0;
  if ((x->app && *x->app && strcmp(e->app, x->app) != 0) || is_staged(e->key))
    return r;
  memset(&ae, 0, sizeof ae);
  if (pcd_blob_get(x->txn, e->key, &ae.blob, &ae.blob_size) < 0 ||
      pcd_desc_get(x->txn, e->key, &ae.desc, &ae.desc_size) < 0)
    return r;
  /* A blob that fails its checksum is not exported; Verify reports it. */
  if (pcache__checksum64(ae.blob, ae.blob_size) != e->checksum)
    return r;
  memcpy(sh.bytes, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  if (pcache__desc_check(ae.desc, ae.desc_size, &sh, 0, mods, &n) == 0) {
    int mr;
    for (size_t i = 0; i < n; i++)
      if ((mr = export_module(x, &mods[i])) < 0)
        return mr;
  }
  memcpy(ae.device_key.bytes, e->key, PCACHE_DEVKEY_SIZE);
  memcpy(ae.state_hash.bytes, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  ae.kind = e->kind;
  ae.app = e->app;
  ae.checksum = e->checksum;
  ae.created = e->created_us / 1000000;
  ae.last_used = e->last_used_us / 1000000;
  ae.hits = e->hits;
  ae.compile_ns = e->compile_ns;
  {
    int er = pcache__archive_add_entry(st->w, &ae);
    if (er < 0 || (er = pcd_app_set_add(&st->apps, e->app)) < 0)
      return er;
  }
  st->entries++;
  st->entry_bytes += pcd_entry_size(e);
  return r;
}

static int exportdevice(void *ctx, const pcd_device *d) {
  void **pair = ctx;
  pcache__archive_writer *w = pair[0];
  const uint8_t *filter = pair[1];
  Pcachepb__DeviceInfo *info;
  int r;
  if ((filter && memcmp(filter, d->key, PCACHE_DEVKEY_SIZE) != 0) || is_staged(d->key))
    return 0;
  info = pcachepb__device_info__unpack(&pcache__pb_allocator, d->info_size, d->info);
  if (!info)
    return 0;
  r = pcache__archive_add_device(w, info);
  pcachepb__device_info__free_unpacked(info, &pcache__pb_allocator);
  return r;
}

static void export_free(exportstate *st) {
  pcache__archive_writer_free(st->w);
  if (st->fd >= 0)
    close(st->fd);
  pcache__free(st->mods);
  pcd_pos_index_free(&st->index);
  pcd_app_set_free(&st->apps);
  pcache__free(st);
}

/* The first slice: the memfd, the header and the device records. */
static int export_start(pcd_txn *txn, const uint8_t *dev, exportstate **ret_st) {
  exportstate *st = pcache__calloc(1, sizeof *st);
  void *pair[2];
  int r;
  if (!st)
    return -ENOMEM;
  st->fd = memfd_create("pcache-export", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  if (st->fd < 0) {
    r = -errno;
    goto out_free;
  }
  if ((r = pcache__archive_writer_new_fd(st->fd, &st->w)) < 0)
    goto out_free;
  pair[0] = st->w;
  pair[1] = (void *)dev;
  if ((r = pcd_devices_foreach(txn, exportdevice, pair)) < 0)
    goto out_free;
  *ret_st = st;
  return 0;

out_free:
  export_free(st);
  return r;
}

static int export_run(pcd_txn *txn, const pcd_config *config, pcd_job *job) {
  const Pcachepb__Export *req = job->req->export;
  Pcachepb__ExportReply *reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  exportstate *st = job->slices;
  exportctx x = {.txn = txn, .app = req->app};
  const uint8_t *dev = NULL;
  uint8_t *none;
  int r;

  if (!reply)
    return -ENOMEM;
  pcachepb__export_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_EXPORT;
  job->resp.export = reply;
  job->more = 0;
  /* The device key's length was checked before the job was queued
   * (validate.c). */
  if (req->device_key.len)
    dev = req->device_key.data;
  if (!st) {
    if ((r = export_start(txn, dev, &st)) < 0)
      goto out_status;
    job->slices = st;
  }
  x.st = st;
  r = st->have_last ? pcd_entries_after(txn, dev, st->last, exportvisit, &x)
                    : pcd_entries_foreach(txn, dev, exportvisit, &x);
  if (r == PCD_SLICE_PAUSE) {
    job->more = 1;
    return 0;
  }
  if (r < 0 || (r = export_programs(txn, st)) < 0 ||
      (r = pcache__archive_finish(st->w, &none, &st->size)) < 0)
    goto out_status;
  st->finished = 1;
  reply->entries = st->entries;
  reply->entry_bytes = st->entry_bytes;
  reply->archive_offset = 0;
  reply->archive_size = st->size;
  log_info("export: %llu entries (%llu bytes), archive of %llu bytes",
           (unsigned long long)st->entries, (unsigned long long)st->entry_bytes,
           (unsigned long long)st->size);
  return 0;

out_status:
  if (r == -ENOMEM || r == PCACHE_EFULL || r == PCACHE_ESTORE)
    return r;
  job->resp.status = r;
  job->resp.message = pcache__arena_strdup(&job->arena, pcache_strerror(r));
  return 0;
}

/* The streamed archive goes as it lies in its memfd. */
static int export_encode(pcd_job *job, pcd_out *ret_out) {
  exportstate *st = job->slices;
  if (st && st->finished && job->resp.status == 0) {
    int fd = st->fd;
    st->fd = -1; /* the reply's now */
    return pcd_reply_encode_fd(&job->resp, fd, st->size, ret_out);
  }
  return pcd_reply_encode(&job->resp, NULL, ret_out);
}

static void export_free_slices(pcd_job *job) {
  export_free(job->slices);
  job->slices = NULL;
}

const pcd_job_ops pcd_job_export = {.name = "export",
                                    .run = export_run,
                                    .read_only = 1,
                                    .encode = export_encode,
                                    .free_slices = export_free_slices,
                                    .bytes = pcd_job_bytes_walk};
