/* Import: a portable archive (proto/archive.h) into the store, in slices
 * that commit with the writer's batches. Every entry is validated with
 * pcd_item_store, exactly as Put does. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/vec.h"
#include "app_set.h"
#include "ops.h"
#include "pos_index.h"
#include "proto/archive.h"
#include "proto/desc_check.h"

/* An import runs in slices, each in the writer's transaction of the
 * moment and committed with it: a slice stops after SLICE_RECORDS archive
 * records or SLICE_BYTES of stored entries, and the job goes back to the
 * end of the writer's queue, so other clients' writes commit in between
 * (docs/archive.md, "Import"). Each slice costs time in proportion to its
 * own records: modules are found through a hash index. */
#define SLICE_RECORDS 4096
#define SLICE_BYTES (8u << 20)

typedef struct importmod {
  pcache__hash hash;
  void *code;
  size_t size;
} importmod;

typedef struct importproblem {
  uint8_t dev[PCACHE_DEVKEY_SIZE], sh[PCACHE_HASH_SIZE];
  int has_dev, has_sh, status;
  char *message;
} importproblem;

/* What a slice changes; kept twice, so that a slice whose transaction is
 * undone (map full, retried) starts again from the last commit. */
typedef struct importprogress {
  pcache_archive_cursor cursor;
  uint64_t accepted, present, refused, evicted;
  uint64_t programs;       /* program names recorded (importprogram) */
  pcd_admission admission; /* what the import has stored, under --max-size */
  size_t n_problems, n_devices;
} importprogress;

typedef struct importstate {
  importprogress at, committed;
  importproblem *problems;
  size_t cap_problems;
  uint8_t (*devices)[PCACHE_DEVKEY_SIZE]; /* device records the archive held */
  size_t cap_devices;
  /* Modules seen so far, whose code matched their hash: an open-addressed
   * index (slot = position + 1) over mods. */
  importmod *mods;
  size_t n_mods, cap_mods;
  pcd_pos_index index;
  /* Apps this import stored (or found) entries of: an archive's program
   * name is recorded only for one of them (importprogram). Names that
   * came before their app's entries wait in programs, at most
   * IMPORT_MAX_PROGRAMS, for the end. */
  pcd_app_set apps;
  struct importprogram_rec {
    char app[PCD_MAX_APP + 1], exe[PCD_EXE_NAME_MAX + 1];
  } * programs;
  size_t n_programs, cap_programs;
} importstate;

#define IMPORT_MAX_PROGRAMS 256

typedef struct importctx {
  pcd_txn *txn;
  const pcd_config *config;
  pcd_job *job;
  importstate *st;
  uint64_t now_us;
  uint64_t slice_records, slice_bytes;
  int fatal;
} importctx;

static uint64_t mod_hash_at(const void *ctx, size_t pos) {
  return pcd_module_hash_key(&((const importstate *)ctx)->mods[pos].hash);
}

struct mod_probe {
  const importstate *st;
  const pcache__hash *hash;
};

static int mod_at(const void *ctx, size_t pos) {
  const struct mod_probe *p = ctx;
  return pcache__hash_equal(&p->st->mods[pos].hash, p->hash);
}

static const importmod *mod_find(const importstate *st, const pcache__hash *hash) {
  struct mod_probe p = {st, hash};
  long at = pcd_pos_index_find(&st->index, pcd_module_hash_key(hash), mod_at, &p);
  return at < 0 ? NULL : &st->mods[at];
}

static int find_mod(void *ctx, const pcache__hash *hash, const void **code, size_t *size) {
  importctx *x = ctx;
  const importmod *m = mod_find(x->st, hash);
  if (!m)
    return -1;
  *code = m->code;
  *size = m->size;
  return 0;
}

/* Ends the slice once it has done its share. */
static int slice_step(importctx *x) {
  return ++x->slice_records >= SLICE_RECORDS || x->slice_bytes >= SLICE_BYTES ? PCD_SLICE_PAUSE : 0;
}

static int add_problem(importctx *x, const uint8_t *dev, const uint8_t *sh, int st,
                       const char *msg) {
  importstate *s = x->st;
  importproblem *p;
  x->st->at.refused++;
  if (s->at.n_problems >= PCD_IMPORT_MAX_PROBLEMS)
    return slice_step(x);
  if (pcache__vec_reserve((void **)&s->problems, &s->cap_problems, s->at.n_problems + 1,
                          sizeof *s->problems, 16) < 0)
    return x->fatal = -ENOMEM;
  p = &s->problems[s->at.n_problems];
  memset(p, 0, sizeof *p);
  if ((p->has_dev = dev != NULL))
    memcpy(p->dev, dev, PCACHE_DEVKEY_SIZE);
  if ((p->has_sh = sh != NULL))
    memcpy(p->sh, sh, PCACHE_HASH_SIZE);
  p->status = st;
  p->message = pcache__strdup(msg ? msg : pcache_strerror(st));
  if (!p->message)
    return x->fatal = -ENOMEM;
  s->at.n_problems++;
  return slice_step(x);
}

static int importdevice(void *ctx, const Pcachepb__DeviceInfo *info) {
  importctx *x = ctx;
  int r;
  if (info->key.len != PCACHE_DEVKEY_SIZE)
    return add_problem(x, NULL, NULL, PCACHE_EBAD_KEY, "device record with a bad key");
  /* Device records count against the cap like entries: an archive of
   * nothing but devices cannot fill the store while it is read. */
  if (!pcd_admission_fits(&x->st->at.admission, PCD_DEVICE_COST_MAX))
    return add_problem(x, info->key.data, NULL, PCACHE_EFULL,
                       "the import holds more than --max-size");
  pcd_admission_take(&x->st->at.admission, PCD_DEVICE_COST_MAX);
  r = pcd_device_touch(x->txn, info, x->now_us / 1000000);
  if (r < 0)
    return x->fatal = r;
  /* Remembered so that, once the import is done, a record none of its
   * entries came to use is dropped again. */
  if (pcache__vec_reserve((void **)&x->st->devices, &x->st->cap_devices, x->st->at.n_devices + 1,
                          sizeof *x->st->devices, 16) < 0)
    return x->fatal = -ENOMEM;
  memcpy(x->st->devices[x->st->at.n_devices++], info->key.data, PCACHE_DEVKEY_SIZE);
  return slice_step(x);
}

static int importmodule(void *ctx, const pcache__hash *hash, const void *code, size_t size) {
  importctx *x = ctx;
  importstate *st = x->st;
  pcache__hash h;
  importmod *m;
  /* Checked like Put modules, by their hash, once: a module whose code
   * does not match is not indexed, so entries naming it are refused as
   * missing it unless the store has it. */
  pcache__hash128(code, size, &h);
  if (!pcache__hash_equal(&h, hash) || mod_find(st, hash))
    return slice_step(x);
  if (pcache__vec_reserve((void **)&st->mods, &st->cap_mods, st->n_mods + 1, sizeof *st->mods, 16) <
      0)
    return x->fatal = -ENOMEM;
  m = &st->mods[st->n_mods];
  m->hash = *hash;
  m->size = size;
  m->code = pcache__malloc(size ? size : 1);
  if (!m->code)
    return x->fatal = -ENOMEM;
  memcpy(m->code, code, size);
  if (pcd_pos_index_add(&st->index, pcd_module_hash_key(hash), st->n_mods, mod_hash_at, st) < 0) {
    pcache__free(m->code);
    return x->fatal = -ENOMEM;
  }
  st->n_mods++;
  return slice_step(x);
}

/* What storing e costs a slice beyond its own bytes: the modules it
 * names. Each entry's reference to a module is counted in the module's
 * record, which LMDB writes whole, so an archive naming one 32 MiB module
 * in 2000 entries made one slice of 94 s that held every other write
 * behind it (the hostile round's I1). A description that does not check
 * costs nothing here: storing it refuses it. */
static uint64_t module_cost(importctx *x, const pcache__archive_entry *e) {
  pcache__hash hashes[PCACHE_DESC_MAX_MODULES];
  size_t n = 0;
  uint64_t bytes = 0;
  if (!e->desc_size ||
      pcache__desc_check(e->desc, e->desc_size, &e->state_hash, e->kind, hashes, &n) != 0)
    return 0;
  for (size_t i = 0; i < n; i++) {
    const importmod *m = mod_find(x->st, &hashes[i]);
    bytes += m ? m->size : 0;
  }
  return bytes;
}

/* An archive's time (unix seconds) in microseconds, clamped to now: 0 (not
 * recorded) and times in the future are now, so that an archive cannot
 * pin its entries ahead of every fresh one in the LRU (nor overflow the
 * conversion). */
static uint64_t archive_time_us(uint64_t s, uint64_t now_us) {
  return s == 0 || s >= now_us / 1000000 ? now_us : s * 1000000;
}

static int importentry(void *ctx, const pcache__archive_entry *e) {
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
  uint64_t cost = pcd_item_cost(&item);
  char *msg = NULL;
  int st = 0, r;
  if (e->app && strlen(e->app) > PCD_MAX_APP)
    return add_problem(x, e->device_key.bytes, e->state_hash.bytes, PCACHE_EBAD_SIZE,
                       "app name too long");
  if (e->blob_size && pcache__checksum64(e->blob, e->blob_size) != e->checksum)
    return add_problem(x, e->device_key.bytes, e->state_hash.bytes, PCACHE_ECHECKSUM, NULL);
  /* What one import stores must fit under the cap together, or its own
   * eviction would drop entries it has just reported accepted. */
  if (!pcd_admission_fits(&x->st->at.admission, cost))
    return add_problem(x, e->device_key.bytes, e->state_hash.bytes, PCACHE_EFULL,
                       "the import holds more than --max-size");
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
  /* Counted apart: "imported 3" of an archive the store already held
   * would read as three new pipelines. */
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  pcd_entry old;
  memcpy(key, e->device_key.bytes, PCACHE_DEVKEY_SIZE);
  memcpy(key + PCACHE_DEVKEY_SIZE, e->state_hash.bytes, PCACHE_HASH_SIZE);
  int present = 0;
  if (!new_device) {
    r = pcd_entry_get(x->txn, key, &old);
    if (r < 0 && r != PCACHE_ENOT_FOUND)
      return x->fatal = r;
    present = r == 0;
  }
  r = pcd_item_store(x->txn, &e->device_key, &item, x->config->max_blob, &x->job->arena, &st, &msg);
  if (r < 0)
    return x->fatal = r;
  if (st < 0) {
    /* A refused entry leaves no device record behind it. */
    if (new_device && (r = pcd_device_forget(x->txn, e->device_key.bytes)) < 0)
      return x->fatal = r;
    return add_problem(x, e->device_key.bytes, e->state_hash.bytes, st, msg);
  }
  if (pcd_app_set_add(&x->st->apps, e->app) < 0)
    return x->fatal = -ENOMEM;
  x->st->at.accepted++;
  x->st->at.present += present;
  pcd_admission_take(&x->st->at.admission, cost);
  x->slice_bytes += cost + module_cost(x, e);
  x->job->stored++;
  return slice_step(x);
}

/* What a program record costs under the cap: its info record (key and
 * value) at their longest. */
#define PROGRAM_COST (16 + PCD_MAX_APP + 16 + PCD_EXE_NAME_MAX)

/* Records app's program name unless this store knows one already: the
 * name this machine saw its own clients run under wins over an archive's
 * word. */
static int program_apply(importctx *x, const char *app, const char *exe) {
  char known[PCD_EXE_NAME_MAX + 1];
  int r = pcd_app_exe_get(x->txn, app, known);
  if (r == 0)
    return 0;
  if (r != PCACHE_ENOT_FOUND)
    return x->fatal = r;
  if (!pcd_admission_fits(&x->st->at.admission, PROGRAM_COST)) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "program record for app '%.40s': the import holds more than --max-size", app);
    return add_problem(x, NULL, NULL, PCACHE_EFULL, msg);
  }
  pcd_admission_take(&x->st->at.admission, PROGRAM_COST);
  if ((r = pcd_app_exe_put(x->txn, app, exe, x->now_us / 1000000)) < 0)
    return x->fatal = r;
  x->st->at.programs++;
  return 0;
}

/* A program name for an app (docs/archive.md). Only an app the import
 * stores entries of gets one (a name for no entry would be an info record
 * nothing ever removes); a record before its app's entries waits for the
 * end. A name that could not be a file name, or an app name out of range,
 * is refused like a bad entry. */
static int importprogram(void *ctx, const char *app, const char *exe) {
  importctx *x = ctx;
  importstate *st = x->st;
  char msg[200];
  int r;
  if (!*app || strlen(app) > PCD_MAX_APP || !pcd_exe_name_ok(exe, strlen(exe))) {
    snprintf(msg, sizeof msg,
             "program record for app '%.40s' refused: an app of 1 to %d bytes and a program "
             "name of 1 to %d bytes of [A-Za-z0-9._+-]",
             app, PCD_MAX_APP, PCD_EXE_NAME_MAX);
    return add_problem(x, NULL, NULL, PCACHE_EBAD_SIZE, msg);
  }
  if (pcd_app_set_has(&st->apps, app)) {
    if ((r = program_apply(x, app, exe)) != 0)
      return r;
    return slice_step(x);
  }
  if (st->n_programs >= IMPORT_MAX_PROGRAMS)
    return slice_step(x); /* more names than any archive of ours has apps: dropped */
  if (pcache__vec_reserve((void **)&st->programs, &st->cap_programs, st->n_programs + 1,
                          sizeof *st->programs, 16) < 0)
    return x->fatal = -ENOMEM;
  snprintf(st->programs[st->n_programs].app, sizeof st->programs[0].app, "%s", app);
  snprintf(st->programs[st->n_programs].exe, sizeof st->programs[0].exe, "%s", exe);
  st->n_programs++;
  return slice_step(x);
}

static int importbad(void *ctx, uint64_t index, int err) {
  importctx *x = ctx;
  char msg[96];
  snprintf(msg, sizeof msg, "record %llu: %s", (unsigned long long)index, pcache_strerror(err));
  return add_problem(x, NULL, NULL, err, msg);
}

/* Drops the problems of a slice that did not commit. */
static void truncate_problems(importstate *st, size_t n) {
  for (size_t i = n; i < st->at.n_problems; i++)
    pcache__free(st->problems[i].message);
}

static void import_free_slices(pcd_job *job) {
  importstate *st = job->slices;
  if (!st)
    return;
  truncate_problems(st, 0);
  pcache__free(st->problems);
  pcache__free(st->devices);
  for (size_t i = 0; i < st->n_mods; i++)
    pcache__free(st->mods[i].code);
  pcache__free(st->mods);
  pcd_pos_index_free(&st->index);
  pcd_app_set_free(&st->apps);
  pcache__free(st->programs);
  pcache__free(st);
  job->slices = NULL;
}

/* The writer committed the transaction that ran the last slice. */
static void import_committed(pcd_job *job) {
  importstate *st = job->slices;
  if (st)
    st->committed = st->at;
}

/* The reply, once the last slice is done: from the state, into the arena. */
static int import_reply(pcd_job *job, int read_status) {
  importstate *st = job->slices;
  pcache__arena *a = &job->arena;
  Pcachepb__ImportReply *reply = pcache__arena_alloc(a, sizeof *reply);
  if (!reply)
    return -ENOMEM;
  pcachepb__import_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_IMPORT;
  job->resp.import = reply;
  reply->accepted = st->at.accepted;
  reply->present = st->at.present;
  reply->refused = st->at.refused;
  if (st->at.n_problems) {
    reply->problems = pcache__arena_alloc(a, st->at.n_problems * sizeof *reply->problems);
    if (!reply->problems)
      return -ENOMEM;
  }
  for (size_t i = 0; i < st->at.n_problems; i++) {
    const importproblem *ip = &st->problems[i];
    Pcachepb__Problem *p = pcache__arena_alloc(a, sizeof *p);
    if (!p)
      return -ENOMEM;
    pcachepb__problem__init(p);
    if (ip->has_dev) {
      p->device_key.data = pcache__arena_memdup(a, ip->dev, PCACHE_DEVKEY_SIZE);
      p->device_key.len = PCACHE_DEVKEY_SIZE;
    }
    if (ip->has_sh) {
      p->state_hash.data = pcache__arena_memdup(a, ip->sh, PCACHE_HASH_SIZE);
      p->state_hash.len = PCACHE_HASH_SIZE;
    }
    p->status = ip->status;
    p->message = pcache__arena_strdup(a, ip->message);
    reply->problems[reply->n_problems++] = p;
  }
  if (read_status < 0) {
    job->resp.status = read_status;
    job->resp.message =
        pcache__arena_printf(a, "%s (%llu entries imported before it)",
                             pcache_strerror(read_status), (unsigned long long)reply->accepted);
  }
  job->evicted = st->at.evicted;
  return a->failed ? -ENOMEM : 0;
}

static int import_run(pcd_txn *txn, const pcd_config *config, pcd_job *job) {
  const Pcachepb__Import *req = job->req->import;
  importstate *st = job->slices;
  importctx x = {.txn = txn, .config = config, .job = job, .now_us = pcd_now_us()};
  pcache__archive_visitor v = {importdevice, importmodule, importentry, importbad, importprogram};
  int r;

  if (!st) {
    st = pcache__calloc(1, sizeof *st);
    if (!st)
      return -ENOMEM;
    job->slices = st;
  }
  /* From the last commit: a slice run again after an undone transaction
   * must not count twice. */
  truncate_problems(st, st->committed.n_problems);
  st->at = st->committed;
  x.st = st;
  /* The cap now (taken carries over from the slices before). */
  st->at.admission.room = pcd_admission_start(config->max_size, PCD_DEVICE_COST_MAX).room;
  job->more = 0;
  r = pcache__archive_read_from(req->archive.data, req->archive.len, &st->at.cursor, &v, &x);
  if (x.fatal)
    return x.fatal;
  if (x.slice_bytes) {
    uint64_t n = 0;
    if ((x.fatal = pcd_evict(txn, config->max_size, &n, NULL)) < 0)
      return x.fatal;
    st->at.evicted += n;
  }
  if (r == PCD_SLICE_PAUSE) {
    job->more = 1;
    return 0;
  }
  if (r == -ENOMEM)
    return r;
  for (size_t i = 0; i < st->at.n_devices; i++)
    if ((x.fatal = pcd_device_forget(txn, st->devices[i])) < 0)
      return x.fatal;
  /* Program names that came before their app's entries; those of apps
   * with none stored are dropped. */
  for (size_t i = 0; i < st->n_programs; i++)
    if (pcd_app_set_has(&st->apps, st->programs[i].app) &&
        program_apply(&x, st->programs[i].app, st->programs[i].exe) < 0 && x.fatal)
      return x.fatal;
  st->n_programs = 0;
  if ((r = import_reply(job, r)) < 0)
    return r;
  log_info("import: %llu accepted (%llu new, %llu already stored), %llu refused, %llu program "
           "names",
           (unsigned long long)st->at.accepted,
           (unsigned long long)(st->at.accepted - st->at.present),
           (unsigned long long)st->at.present, (unsigned long long)st->at.refused,
           (unsigned long long)st->at.programs);
  return 0;
}

const pcd_job_ops pcd_job_import = {.name = "import",
                                    .run = import_run,
                                    .committed = import_committed,
                                    .free_slices = import_free_slices,
                                    .bytes = pcd_job_bytes_walk};
