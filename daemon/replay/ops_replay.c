/* The replay's writer jobs (replay.h): ReplayStart, and the start a
 * client's new device key sets off, find superseded keys and write their
 * progress records; ReplayClaim takes the replayer's results and hands
 * out its next item; the sync job writes bad-pipeline records the
 * supervisor queued, evicts a finished replay's old key and loads the
 * next replay. They run on the writer thread, in its transaction, so the
 * order walk, the records and the entries the replayer Puts are seen in
 * one sequence. */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "proto/desc_check.h"
#include "replay.h"

/* Items a claim may pass over as unreadable before it answers "ask again"
 * (each is recorded as bad): a claim stays short whatever the store. */
#define CLAIM_MAX_SKIPS 64

static void entry_key(uint8_t out[PCD_ENTRY_KEY_SIZE], const uint8_t *dev, const pcache__hash *h) {
  memcpy(out, dev, PCACHE_DEVKEY_SIZE);
  memcpy(out + PCACHE_DEVKEY_SIZE, h->bytes, PCACHE_HASH_SIZE);
}

/* ------------------------------------------------------------ loading */

struct count_ctx {
  pcd_txn *txn;
  const uint8_t *new_key;
  uint64_t total, done;
};

static int count_entry(void *ctx, const pcd_entry *e) {
  struct count_ctx *c = ctx;
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcd_entry other;
  int r;
  memcpy(k, c->new_key, PCACHE_DEVKEY_SIZE);
  memcpy(k + PCACHE_DEVKEY_SIZE, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  c->total++;
  r = pcd_entry_get(c->txn, k, &other);
  if (r == 0)
    c->done++;
  return r == PCACHE_ENOT_FOUND ? 0 : r;
}

static int count_bad(void *ctx, const pcache__hash *h, const char *reason, size_t len) {
  (void)h, (void)reason, (void)len;
  (*(uint64_t *)ctx)++;
  return 0;
}

/* Makes rec the replay under way, counting what is done from the store
 * itself (an old entry is done when the new key has its state hash), so
 * nothing but the record needs to survive a crash or a reboot. */
static int load(pcd_replay *rp, pcd_txn *txn, const pcd_replay_record *rec) {
  struct count_ctx c = {txn, rec->new_key, 0, 0};
  uint64_t failed = 0;
  int r = pcd_entries_foreach(txn, rec->old_key, count_entry, &c);
  if (r == 0)
    r = pcd_replay_bad_foreach(txn, rec->old_key, rec->new_key, count_bad, &failed);
  if (r < 0)
    return r;
  pcd_replay_unload(rp);
  rp->st.active = 1;
  rp->st.rec = *rec;
  rp->st.total = c.total;
  rp->st.done = c.done;
  rp->st.failed = failed;
  rp->st.done_at_load = c.done;
  rp->st.load_us = pcache__mono_us();
  return 0;
}

static int device_missing(const pcd_replay *rp, const uint8_t *key) {
  for (unsigned i = 0; i < rp->n_no_device; i++)
    if (memcmp(rp->no_device[i], key, PCACHE_DEVKEY_SIZE) == 0)
      return 1;
  return 0;
}

struct first_ctx {
  const pcd_replay *rp;
  pcd_replay_record rec;
};

static int first_pending(void *ctx, const pcd_replay_record *rec) {
  struct first_ctx *f = ctx;
  if (rec->state != PCD_REPLAY_PENDING || device_missing(f->rp, rec->new_key))
    return 0;
  f->rec = *rec;
  return 1;
}

/* Loads the first pending replay when none is under way. Returns 1 when
 * one is under way afterwards, 0 when none, or an error. */
static int load_next(pcd_replay *rp, pcd_txn *txn) {
  struct first_ctx f = {.rp = rp};
  pcd_replay_record rec;
  int r;
  if (rp->st.active)
    return 1;
  r = pcd_replay_records_foreach(txn, first_pending, &f);
  if (r <= 0)
    return r;
  rec = f.rec;
  if ((r = load(rp, txn, &rec)) < 0)
    return r;
  {
    char o[65], n[65];
    pcache__devkey ok, nk;
    memcpy(ok.bytes, rec.old_key, PCACHE_DEVKEY_SIZE);
    memcpy(nk.bytes, rec.new_key, PCACHE_DEVKEY_SIZE);
    pcache__devkey_format(&ok, o);
    pcache__devkey_format(&nk, n);
    log_info("replay: %s -> %s: %llu of %llu entries already there, %llu failed before", o, n,
             (unsigned long long)rp->st.done, (unsigned long long)rp->st.total,
             (unsigned long long)rp->st.failed);
  }
  return 1;
}

/* Writes the bad records waiting in rp; they leave the queue when the
 * transaction commits (pcd_replay_txn_leave). */
static int write_pending_bad(pcd_replay *rp, pcd_txn *txn) {
  int r;
  for (unsigned i = 0; i < rp->st.n_pending_bad; i++) {
    const pcd_replay_bad *b = &rp->st.pending_bad[i];
    if ((r = pcd_replay_bad_put(txn, b->old_key, b->new_key, &b->hash, b->reason)) < 0)
      return r;
  }
  rp->st.n_bad_written = rp->st.n_pending_bad;
  return 0;
}

static void wake(pcd_replay *rp, int spawn, int sync) {
  rp->want_spawn |= spawn;
  rp->want_sync |= sync;
  if (rp->handles_ready && !rp->closing)
    uv_async_send(&rp->wake);
}

/* ------------------------------------------------------------ start */

struct dev_list {
  pcd_arena *arena;
  pcd_device *v;
  size_t n, cap;
};

static int collect_device(void *ctx, const pcd_device *d) {
  struct dev_list *l = ctx;
  void *grown = pcd_arena_grow(l->arena, l->v, l->n, &l->cap, sizeof *l->v);
  if (!grown)
    return -ENOMEM;
  l->v = grown;
  l->v[l->n] = *d;
  l->v[l->n].info = NULL;
  l->n++;
  return 0;
}

/* Whether b is another driver build of a's device (a driver update). A
 * staged key is no device's: its replay is planned by the Put that
 * staged items (pcd_replay_stage), never found here. */
static int same_device(const uint8_t *a, const uint8_t *b) {
  pcache__devkey ka, kb;
  memcpy(ka.bytes, a, PCACHE_DEVKEY_SIZE);
  memcpy(kb.bytes, b, PCACHE_DEVKEY_SIZE);
  if (pcache__devkey_is_staged(&ka) || pcache__devkey_is_staged(&kb))
    return 0;
  return memcmp(a + 16, b + 16, 8) == 0 && memcmp(a + 28, b + 28, 4) == 0;
}

/* Records the replay old -> new unless it is there; a finished one is
 * taken up again only when asked (again). Returns 1 when pending now. */
static int plan(pcd_txn *txn, const uint8_t *old_key, const uint8_t *new_key, int again) {
  pcd_replay_record rec;
  int r = pcd_replay_record_get(txn, old_key, new_key, &rec);
  if (r < 0 && r != PCACHE_ENOT_FOUND && r != PCACHE_ESTORE)
    return r;
  if (r == 0 && rec.state == PCD_REPLAY_PENDING)
    return 1;
  if (r == 0 && !again)
    return 0;
  memset(&rec, 0, sizeof rec);
  memcpy(rec.old_key, old_key, PCACHE_DEVKEY_SIZE);
  memcpy(rec.new_key, new_key, PCACHE_DEVKEY_SIZE);
  rec.state = PCD_REPLAY_PENDING;
  rec.created_us = pcd_now_us();
  r = pcd_replay_record_put(txn, &rec);
  return r < 0 ? r : 1;
}

static pcd_replay *job_replay(const pcd_job *job) { return job->ctx; }

static int plan_exe(pcd_replay *rp, pcd_txn *txn);

static int count_pending(void *ctx, const pcd_replay_record *rec) {
  if (rec->state == PCD_REPLAY_PENDING)
    (*(uint32_t *)ctx)++;
  return 0;
}

static int op_start(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  pcd_replay *rp = job_replay(job);
  const Pcachepb__ReplayStart *req = job->req ? job->req->replay_start : NULL;
  Pcachepb__ReplayStartReply *reply = NULL;
  struct dev_list l = {.arena = &job->arena};
  const uint8_t *only = req && req->device_key.len ? req->device_key.data : NULL;
  const char *boost = req ? req->app : job->app;
  int r, loaded;
  (void)cfg;
  if (job->conn) {
    if (!(reply = pcd_arena_alloc(&job->arena, sizeof *reply)))
      return -ENOMEM;
    pcachepb__replay_start_reply__init(reply);
    job->resp.body_case = PCACHEPB__RESPONSE__BODY_REPLAY_START;
    job->resp.replay_start = reply;
    if (job->detected) { /* the job owns them until its reply is sent */
      reply->detected = job->detected->detected;
      reply->n_detected = job->detected->n_detected;
      reply->detect_error = job->detected->detect_error;
    }
  }
  if (!rp)
    return 0;
  /* The probe's keys were noted as a client's, in jobs before this one:
   * only the count is left to say. */
  if (req && req->detect)
    return reply ? pcd_replay_records_foreach(txn, count_pending, &reply->plans) : 0;
  if ((r = pcd_devices_foreach(txn, collect_device, &l)) < 0)
    return r;
  pcd_replay_txn_enter(rp);
  /* A client names this key: its device is here (again). */
  for (unsigned i = 0; !req && i < rp->n_no_device; i++)
    if (memcmp(rp->no_device[i], job->device_key, PCACHE_DEVKEY_SIZE) == 0)
      memmove(rp->no_device[i], rp->no_device[--rp->n_no_device], PCACHE_DEVKEY_SIZE);
  for (size_t i = 0; i < l.n && r >= 0; i++) {
    const pcd_device *old = &l.v[i];
    const uint8_t *new_key = NULL;
    if (!old->entries || (only && memcmp(only, old->key, PCACHE_DEVKEY_SIZE) != 0))
      continue;
    if (!req) {
      /* A client names job->device_key now: it supersedes its kin. */
      if (memcmp(old->key, job->device_key, PCACHE_DEVKEY_SIZE) != 0 &&
          same_device(old->key, job->device_key))
        new_key = job->device_key;
    } else if (rp->st.have_last_new_key && same_device(old->key, rp->st.last_new_key) &&
               memcmp(old->key, rp->st.last_new_key, PCACHE_DEVKEY_SIZE) != 0) {
      new_key = rp->st.last_new_key;
    } else {
      /* Asked without a client on the new key this run: the kin seen
       * last is taken as the driver now installed. */
      uint64_t best = old->last_seen;
      for (size_t j = 0; j < l.n; j++)
        if (j != i && same_device(old->key, l.v[j].key) && l.v[j].last_seen > best) {
          best = l.v[j].last_seen;
          new_key = l.v[j].key;
        }
    }
    if (new_key)
      r = plan(txn, old->key, new_key, req != NULL);
  }
  if (r >= 0 && !req) {
    memcpy(rp->st.last_new_key, job->device_key, PCACHE_DEVKEY_SIZE);
    rp->st.have_last_new_key = 1;
  }
  if (r >= 0)
    r = loaded = load_next(rp, txn);
  if (r >= 0 && loaded && boost && *boost) {
    snprintf(rp->st.boost_app, sizeof rp->st.boost_app, "%s", boost);
    rp->st.boost = 1;
    rp->st.boost_has_after = 0;
  }
  if (r >= 0)
    r = plan_exe(rp, txn);
  if (r < 0)
    return r;
  if (reply)
    r = pcd_replay_records_foreach(txn, count_pending, &reply->plans);
  return r < 0 ? r : 0;
}

/* Every replay job's aborted hook: the state goes back to the committed. */
static void replay_aborted(pcd_job *job) {
  if (job_replay(job))
    pcd_replay_txn_leave(job_replay(job), 0);
}

static void start_committed(pcd_job *job) {
  pcd_replay *rp = job_replay(job);
  if (!rp)
    return;
  pcd_replay_txn_leave(rp, 1);
  pthread_mutex_lock(&rp->lock);
  if (job->req) { /* asked for: a replay that gave up tries again, now */
    rp->gave_up = 0;
    rp->failures_in_row = 0;
    rp->spawn_after_ms = 0;
    rp->n_no_device = 0;
  }
  if (rp->st.active)
    wake(rp, 1, 0);
  pthread_mutex_unlock(&rp->lock);
}

/* The Put's hooks (pcd_replay_job_hooks, replay.h says what each does). */
static int put_stage(pcd_job *job, pcd_txn *txn, const pcache__devkey *key) {
  pcd_replay *rp = job_replay(job);
  pcache__devkey staged;
  int r;
  if (!rp)
    return 0;
  pcache__devkey_staged(key, &staged);
  pcd_replay_txn_enter(rp);
  /* Again when finished: these items came after it. */
  if ((r = plan(txn, staged.bytes, key->bytes, 1)) < 0)
    return r;
  if ((r = load_next(rp, txn)) >= 0)
    r = plan_exe(rp, txn);
  return r < 0 ? r : 0;
}

/* ------------------------------------------------------------ claim */

struct pick {
  pcd_replay *rp;
  pcd_txn *txn;
  pcache__hash found;
  int r;
};

static int pending(struct pick *p, const pcache__hash *h) {
  pcd_replay *rp = p->rp;
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  int r;
  if (pcd_replay_in_flight(rp, h))
    return 0;
  entry_key(k, rp->st.rec.new_key, h);
  if ((r = pcd_entry_get(p->txn, k, &e)) != PCACHE_ENOT_FOUND)
    return r < 0 ? r : 0;
  r = pcd_replay_bad_get(p->txn, rp->st.rec.old_key, rp->st.rec.new_key, h);
  if (r != PCACHE_ENOT_FOUND)
    return r < 0 ? r : 0;
  return 1;
}

static int pick_in_app(void *ctx, const pcache__hash *h, pcache__hash *after, int *has_after) {
  struct pick *p = ctx;
  int r = pending(p, h);
  *after = *h;
  *has_after = 1;
  if (r > 0)
    p->found = *h;
  return r;
}

static int pick_boost(void *ctx, const pcache__hash *h) {
  struct pick *p = ctx;
  return pick_in_app(ctx, h, &p->rp->st.boost_after, &p->rp->st.boost_has_after);
}

static int pick_cur(void *ctx, const pcache__hash *h) {
  struct pick *p = ctx;
  return pick_in_app(ctx, h, &p->rp->st.cur_after, &p->rp->st.cur_has_after);
}

static int pick_lru(void *ctx, const uint8_t lru_key[PCD_LRU_KEY_SIZE]) {
  struct pick *p = ctx;
  pcd_replay *rp = p->rp;
  pcache__hash h;
  pcd_entry e;
  int r;
  memcpy(rp->st.lru_before, lru_key, PCD_LRU_KEY_SIZE);
  rp->st.lru_has_before = 1;
  memcpy(h.bytes, lru_key + 8 + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  if ((r = pending(p, &h)) <= 0)
    return r;
  if ((r = pcd_entry_get(p->txn, lru_key + 8, &e)) < 0)
    return r == PCACHE_ENOT_FOUND ? 0 : r;
  /* The most recently used app with work left: all of it next. */
  snprintf(rp->st.cur_app, sizeof rp->st.cur_app, "%s", e.app);
  rp->st.cur = 1;
  rp->st.cur_has_after = 0;
  p->found = h;
  return 1;
}

/* The next item in the replay's order: 1 (p->found), 0 (none) or an
 * error. */
static int next_item(struct pick *p) {
  pcd_replay *rp = p->rp;
  int r;
  if (rp->st.boost) {
    r = pcd_app_hashes_after(p->txn, rp->st.rec.old_key, rp->st.boost_app,
                             rp->st.boost_has_after ? &rp->st.boost_after : NULL, pick_boost, p);
    if (r != 0)
      return r;
    rp->st.boost = 0;
  }
  if (rp->st.cur) {
    r = pcd_app_hashes_after(p->txn, rp->st.rec.old_key, rp->st.cur_app,
                             rp->st.cur_has_after ? &rp->st.cur_after : NULL, pick_cur, p);
    if (r != 0)
      return r;
    rp->st.cur = 0;
  }
  return pcd_lru_newest_before(p->txn, rp->st.rec.old_key,
                               rp->st.lru_has_before ? rp->st.lru_before : NULL, pick_lru, p);
}

/* The program name a replayer must run under to be handed old entry h:
 * the name recorded for its app, or "" (pcache-replay's own) when there
 * is none or builds under the program's name are off (replay_exe.c). An
 * entry that cannot be read gets "": fill_item records it as bad. */
static int item_exe(pcd_replay *rp, pcd_txn *txn, const pcache__hash *h,
                    char out[PCD_EXE_NAME_MAX + 1]) {
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  int r;
  out[0] = '\0';
  if (!atomic_load(&rp->as_program))
    return 0;
  entry_key(k, rp->st.rec.old_key, h);
  if ((r = pcd_entry_get(txn, k, &e)) == 0)
    r = pcd_app_exe_get(txn, e.app, out);
  if (r == PCACHE_ESTORE || r == -ENOMEM)
    return r;
  if (r < 0)
    out[0] = '\0';
  return 0;
}

/* Sets the name the next replayer starts under (rp->next_exe) to the one
 * the next item in the order needs, leaving the order where it was: so
 * that the first replayer of a replay, or the one after a crash, is the
 * right one and no process is started only to be told to finish. Only a
 * guess: the claims decide (op_claim). */
static int plan_exe(pcd_replay *rp, pcd_txn *txn) {
  struct pick p = {.rp = rp, .txn = txn};
  pcd_replay_state *before;
  int r = 1;
  if (!rp->st.active || rp->running || !atomic_load(&rp->as_program))
    return 0;
  if (rp->st.n_retry) {
    p.found = rp->st.retry[rp->st.n_retry - 1];
  } else {
    if (!(before = pcache__malloc(sizeof *before)))
      return 0; /* a guess left out */
    *before = rp->st;
    r = next_item(&p);
    rp->st = *before;
    pcache__free(before);
  }
  if (r <= 0) {
    rp->next_exe[0] = '\0';
    return r;
  }
  return item_exe(rp, txn, &p.found, rp->next_exe);
}

/* A staged entry's blob, when it came with one, seeds its build
 * (ReplayItem.seed). A driver update's old blobs are another driver's,
 * and go nowhere; a seed whose checksum fails is left out, and the item
 * built from its description alone. */
static int fill_seed(pcd_replay *rp, pcd_txn *txn, pcd_job *job, const uint8_t *k,
                     const pcd_entry *e, Pcachepb__ReplayItem *item) {
  pcache__devkey old;
  const uint8_t *blob;
  size_t size;
  int r;
  memcpy(old.bytes, rp->st.rec.old_key, PCACHE_DEVKEY_SIZE);
  if (!pcache__devkey_is_staged(&old) || !e->blob_size)
    return 0;
  if ((r = pcd_blob_get(txn, k, &blob, &size)) < 0)
    return r == PCACHE_ENOT_FOUND ? 0 : r;
  if (size != e->blob_size || pcache__checksum64(blob, size) != e->checksum)
    return 0;
  if (!(item->seed.data = pcd_arena_memdup(&job->arena, blob, size)))
    return -ENOMEM;
  item->seed.len = size;
  return 0;
}

/* Fills item with what the replayer needs of old entry h (copied into
 * the job's arena: the reply is encoded after the transaction). Returns
 * 0, 1 (unreadable: recorded as bad) or an error. */
static int fill_item(pcd_replay *rp, pcd_txn *txn, pcd_job *job, const pcache__hash *h,
                     Pcachepb__ReplayItem *item) {
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcache__hash mods[PCACHE_DESC_MAX_MODULES];
  const uint8_t *desc, *code;
  size_t desc_size, n_mods = 0, code_size;
  pcd_entry e;
  int r;
  entry_key(k, rp->st.rec.old_key, h);
  if ((r = pcd_entry_get(txn, k, &e)) < 0 || (r = pcd_desc_get(txn, k, &desc, &desc_size)) < 0)
    goto out_bad;
  if ((r = pcache__desc_check(desc, desc_size, h, e.kind, mods, &n_mods)) < 0)
    goto out_bad;
  item->old_key.data = pcd_arena_memdup(&job->arena, rp->st.rec.old_key, PCACHE_DEVKEY_SIZE);
  item->old_key.len = PCACHE_DEVKEY_SIZE;
  item->state_hash.data = pcd_arena_memdup(&job->arena, h->bytes, PCACHE_HASH_SIZE);
  item->state_hash.len = PCACHE_HASH_SIZE;
  item->app = pcd_arena_strdup(&job->arena, e.app);
  item->kind = (Pcachepb__EntryKind)e.kind;
  item->desc.data = pcd_arena_memdup(&job->arena, desc, desc_size);
  item->desc.len = desc_size;
  if ((r = fill_seed(rp, txn, job, k, &e, item)) < 0)
    return r;
  item->modules = pcd_arena_alloc(&job->arena, (n_mods + 1) * sizeof *item->modules);
  if (!item->modules)
    return -ENOMEM;
  for (size_t i = 0; i < n_mods; i++) {
    Pcachepb__Module *m = pcd_arena_alloc(&job->arena, sizeof *m);
    if (!m)
      return -ENOMEM;
    if ((r = pcd_module_get(txn, &mods[i], &code, &code_size)) < 0)
      goto out_bad;
    pcachepb__module__init(m);
    m->hash.data = pcd_arena_memdup(&job->arena, mods[i].bytes, PCACHE_HASH_SIZE);
    m->hash.len = PCACHE_HASH_SIZE;
    m->code.data = pcd_arena_memdup(&job->arena, code, code_size);
    m->code.len = code_size;
    item->modules[item->n_modules++] = m;
  }
  return 0;

out_bad:
  if (r == PCACHE_ESTORE || r == -ENOMEM)
    return r;
  pcd_replay_queue_bad(rp, h, pcache_strerror(r));
  return 1;
}

/* The replay is over: what is done and failed is recorded, the sync job
 * evicts the old key. */
static int finish_replay(pcd_replay *rp, pcd_txn *txn) {
  pcd_replay_record rec = rp->st.rec;
  int r;
  rec.state = PCD_REPLAY_FINISHED;
  rec.finished_us = pcd_now_us();
  rec.total = rp->st.total;
  rec.failed = rp->st.failed;
  rec.done = rp->st.total > rp->st.failed ? rp->st.total - rp->st.failed : 0;
  if ((r = pcd_replay_record_put(txn, &rec)) < 0)
    return r;
  rp->st.rec = rec;
  rp->st.done = rec.done;
  rp->st.finished_now = 1;
  return 0;
}

static int take_results(pcd_replay *rp, const Pcachepb__ReplayClaim *claim) {
  for (size_t i = 0; i < claim->n_results; i++) {
    const Pcachepb__ReplayResult *res = claim->results[i];
    pcache__hash h;
    if (res->state_hash.len != PCACHE_HASH_SIZE)
      continue;
    memcpy(h.bytes, res->state_hash.data, PCACHE_HASH_SIZE);
    if (!pcd_replay_land(rp, &h))
      continue; /* not ours (any more): an earlier replayer's, or another replay's */
    rp->landed++;
    if (res->status == 0)
      rp->st.done++;
    else
      pcd_replay_queue_bad(
          rp, &h, res->message && *res->message ? res->message : pcache_strerror(res->status));
  }
  return 0;
}

static int op_claim(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  pcd_replay *rp = job_replay(job);
  const Pcachepb__ReplayClaim *claim = job->req->replay_claim;
  Pcachepb__ReplayClaimReply *reply = pcd_arena_alloc(&job->arena, sizeof *reply);
  Pcachepb__ReplayItem *item = pcd_arena_alloc(&job->arena, sizeof *item);
  struct pick p = {.rp = rp, .txn = txn};
  uint64_t now = pcache__mono_us();
  char want[PCD_EXE_NAME_MAX + 1];
  /* The order as it was before the walk that found the item: put back
   * when the item is another program's (below). */
  pcd_replay_state *before = pcd_arena_alloc(&job->arena, sizeof *before);
  int r = 0, grant = 0, retried;
  (void)cfg;
  if (!reply || !item || !before)
    return -ENOMEM;
  pcachepb__replay_claim_reply__init(reply);
  pcachepb__replay_item__init(item);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_REPLAY_CLAIM;
  job->resp.replay_claim = reply;
  if (!rp) {
    reply->finished = 1;
    return 0;
  }
  pcd_replay_txn_enter(rp);
  if (!rp->running || job->peer_pid != rp->pid) {
    /* Only the replayer this daemon started (its pid as the kernel gave
     * it at accept, not as Hello says) is handed items and heard: another
     * client's claims would hold items it never builds, and its results
     * would mark good pipelines bad. */
    reply->finished = 1;
    goto out;
  }
  take_results(rp, claim);
  if ((r = write_pending_bad(rp, txn)) < 0)
    goto out;
  rp->st.paused[0] = '\0';
  if (claim->last || !rp->st.active || claim->new_key.len != PCACHE_DEVKEY_SIZE ||
      memcmp(claim->new_key.data, rp->st.rec.new_key, PCACHE_DEVKEY_SIZE) != 0) {
    reply->finished = 1;
    goto out;
  }
  if (rp->st.n_flight >= PCD_REPLAY_MAX_INFLIGHT) {
    /* More claims out than a replayer has threads: it asks again without
     * reporting. Nothing more until results land. */
    reply->wait_ms = 100;
    goto out;
  }
  if (pcd_replay_fg_busy(rp, now)) {
    /* A client is loading or building pipelines: the machine is theirs,
     * but for one item at a time every busy_every_us, so that an app that
     * never stops fetching cannot hold the replay back for ever. */
    snprintf(rp->st.paused, sizeof rp->st.paused, "foreground");
    if (rp->st.n_flight || now - rp->st.busy_grant_us < rp->busy_every_us) {
      reply->wait_ms = 250;
      goto out;
    }
    grant = 1;
  }
  for (int skips = 0; skips < CLAIM_MAX_SKIPS; skips++) {
    retried = 0;
    if (rp->st.n_retry && !rp->st.n_flight) {
      /* One at a time, so that a crash names its pipeline. */
      p.found = rp->st.retry[--rp->st.n_retry];
      rp->st.retry_in_flight = 1;
      retried = 1;
      if ((r = pending(&p, &p.found)) < 0)
        goto out;
      if (r == 0) {
        rp->st.retry_in_flight = 0;
        continue;
      }
    } else if (rp->st.n_retry || rp->st.retry_in_flight) {
      reply->wait_ms = 100;
      goto out;
    } else {
      *before = rp->st;
      if ((r = next_item(&p)) <= 0) {
        if (r < 0)
          goto out;
        /* Nothing left to hand out: this replayer thread is done; the
         * replay is, once nothing is out either. */
        reply->finished = 1;
        if (!rp->st.n_flight)
          r = finish_replay(rp, txn);
        goto out;
      }
    }
    if ((r = item_exe(rp, txn, &p.found, want)) < 0)
      goto out;
    if (strcmp(want, rp->exe_name) != 0) {
      /* Another program's item: it waits where it was for a replayer
       * under that name, which the supervisor starts once this one has
       * finished (each thread is told so at its next claim). */
      if (retried) {
        rp->st.retry[rp->st.n_retry++] = p.found;
        rp->st.retry_in_flight = 0;
      } else {
        rp->st = *before;
      }
      snprintf(rp->next_exe, sizeof rp->next_exe, "%s", want);
      rp->switching = 1;
      reply->finished = 1;
      goto out;
    }
    if ((r = fill_item(rp, txn, job, &p.found, item)) < 0)
      goto out;
    if (r == 0) {
      rp->st.flight[rp->st.n_flight].hash = p.found;
      rp->st.flight[rp->st.n_flight].started_us = now;
      rp->st.n_flight++;
      if (grant)
        rp->st.busy_grant_us = now;
      reply->item = item;
      goto out;
    }
    rp->st.retry_in_flight = 0;
  }
  reply->wait_ms = 1;
  r = 0;
out:
  return r < 0 ? r : 0;
}

static void put_landed(pcd_job *job, const Pcachepb__Put *put, const Pcachepb__PutReply *reply) {
  pcd_replay *rp = job_replay(job);
  /* Every other client's Put passes here without the replay's lock. */
  if (!rp || !job->peer_pid || job->peer_pid != atomic_load(&rp->replayer_pid) || !put->device ||
      put->device->key.len != PCACHE_DEVKEY_SIZE || reply->n_results != put->n_items)
    return;
  pcd_replay_txn_enter(rp);
  /* Only the replayer this daemon started, for the replay under way: its
   * items in flight land as its next claim's report would land them. */
  if (!rp->running || job->peer_pid != rp->pid || !rp->st.active ||
      memcmp(put->device->key.data, rp->st.rec.new_key, PCACHE_DEVKEY_SIZE) != 0)
    return; /* left at the commit or abort, as every job's */
  for (size_t i = 0; i < put->n_items; i++) {
    const Pcachepb__PutResult *res = reply->results[i];
    pcache__hash h;
    if (put->items[i]->state_hash.len != PCACHE_HASH_SIZE)
      continue;
    memcpy(h.bytes, put->items[i]->state_hash.data, PCACHE_HASH_SIZE);
    if (!pcd_replay_land(rp, &h))
      continue;
    rp->landed++;
    if (res->status == 0)
      rp->st.done++;
    else
      pcd_replay_queue_bad(
          rp, &h, res->message && *res->message ? res->message : pcache_strerror(res->status));
  }
}

static void put_settled(pcd_job *job, int committed) {
  pcd_replay *rp = job_replay(job);
  if (!rp)
    return;
  pcd_replay_txn_leave(rp, committed);
  if (!committed || !job->staged)
    return;
  pthread_mutex_lock(&rp->lock);
  if (rp->st.active)
    wake(rp, 1, 0);
  pthread_mutex_unlock(&rp->lock);
}

static void claim_committed(pcd_job *job) {
  pcd_replay *rp = job_replay(job);
  if (!rp)
    return;
  pcd_replay_txn_leave(rp, 1);
  pthread_mutex_lock(&rp->lock);
  if (rp->st.finished_now || rp->st.n_pending_bad)
    wake(rp, 0, 1);
  pthread_mutex_unlock(&rp->lock);
}

/* ------------------------------------------------------------ sync */

static int latest_use(void *ctx, const uint8_t lru_key[PCD_LRU_KEY_SIZE]) {
  uint64_t t = 0;
  for (int i = 0; i < 8; i++)
    t = t << 8 | lru_key[i];
  *(uint64_t *)ctx = t;
  return 1;
}

struct evict_ctx {
  pcd_txn *txn;
  const pcd_replay_record *rec;
  int staged;
  pcd_key_list keys;
  uint64_t left; /* staged entries neither built nor bad */
};

/* A staged entry is done with once the new key has it or it is recorded
 * bad; one staged while the replay ran, which its walk may have passed,
 * stays for the next round. */
static int collect_entry(void *ctx, const pcd_entry *e) {
  struct evict_ctx *x = ctx;
  if (x->staged) {
    uint8_t k[PCD_ENTRY_KEY_SIZE];
    pcache__hash h;
    pcd_entry other;
    int r;
    memcpy(h.bytes, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
    entry_key(k, x->rec->new_key, &h);
    r = pcd_entry_get(x->txn, k, &other);
    if (r == PCACHE_ENOT_FOUND)
      r = pcd_replay_bad_get(x->txn, x->rec->old_key, x->rec->new_key, &h);
    if (r == PCACHE_ENOT_FOUND) {
      x->left++;
      return 0;
    }
    if (r < 0)
      return r;
  }
  return pcd_key_list_add(&x->keys, e->key);
}

/* The old key's entries go once its replay is done, unless a client
 * used one since the replay began: then another driver build still runs
 * them (two installed side by side), and they stay for LRU to judge. A
 * staged key's entries are no client's to use: those built or bad go,
 * and a replay is planned again for any left. */
static int evict_old(pcd_txn *txn, const pcd_replay_record *rec) {
  pcache__devkey old;
  struct evict_ctx x = {.txn = txn, .rec = rec};
  pcd_key_list *keys = &x.keys;
  pcd_snap_list snaps = {0};
  uint64_t last = 0, n = 0;
  int r;
  memcpy(old.bytes, rec->old_key, PCACHE_DEVKEY_SIZE);
  x.staged = pcache__devkey_is_staged(&old);
  if (!x.staged) {
    if ((r = pcd_lru_newest_before(txn, rec->old_key, NULL, latest_use, &last)) < 0)
      return r;
    if (last > rec->created_us) {
      log_info("replay: the old key was used during its replay; leaving its entries to LRU");
      return 0;
    }
  }
  r = pcd_entries_foreach(txn, rec->old_key, collect_entry, &x);
  for (size_t i = 0; r >= 0 && !keys->oom && i < keys->keys.n; i++, n++)
    r = pcd_entry_delete(txn, keys->keys.items[i].bytes, NULL);
  if (r >= 0 && !keys->oom)
    r = pcd_snapshots_foreach(txn, rec->old_key, pcd_snap_list_visit, &snaps);
  for (size_t i = 0; r >= 0 && i < snaps.v.n; i++)
    r = pcd_snapshot_delete(txn, rec->old_key, snaps.v.items[i].app, NULL);
  if (r >= 0 && !keys->oom)
    r = pcd_device_forget(txn, rec->old_key);
  if (r >= 0 && !keys->oom)
    log_info("replay: evicted the old key's %llu entries", (unsigned long long)n);
  if (r >= 0 && !keys->oom && x.left) {
    log_info("replay: %llu staged items came during the build; building them next",
             (unsigned long long)x.left);
    r = plan(txn, rec->old_key, rec->new_key, 1);
  }
  pcache_vec_free(&keys->keys);
  pcache_vec_free(&snaps.v);
  return keys->oom ? -ENOMEM : (r == PCACHE_ENOT_FOUND ? 0 : r < 0 ? r : 0);
}

static int op_sync(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  pcd_replay *rp = job_replay(job);
  int r;
  (void)cfg;
  if (!rp)
    return 0;
  pcd_replay_txn_enter(rp);
  r = write_pending_bad(rp, txn);
  if (r >= 0 && rp->st.active && rp->drop_loaded) {
    /* Its device is gone (replay_supervise.c): it stays recorded, pending,
     * and the next one is loaded. */
    pcd_replay_unload(rp);
    rp->drop_loaded = 0;
  }
  if (r >= 0 && rp->st.active && rp->st.finished_now) {
    pcd_replay_record rec = rp->st.rec;
    if ((r = evict_old(txn, &rec)) >= 0)
      pcd_replay_unload(rp);
  }
  if (r >= 0)
    r = load_next(rp, txn);
  if (r >= 0)
    r = plan_exe(rp, txn);
  return r < 0 ? r : 0;
}

static void sync_committed(pcd_job *job) {
  pcd_replay *rp = job_replay(job);
  if (!rp)
    return;
  pcd_replay_txn_leave(rp, 1);
  pthread_mutex_lock(&rp->lock);
  if (rp->st.active)
    wake(rp, 1, 0);
  pthread_mutex_unlock(&rp->lock);
}

static int put_stages(const pcd_job *job) { return pcd_replay_stages(job_replay(job)); }

const pcd_job_hooks pcd_replay_job_hooks = {
    .stages = put_stages, .stage = put_stage, .landed = put_landed, .settled = put_settled};

const pcd_job_ops pcd_job_replay_start = {.name = "replay_start",
                                          .run = op_start,
                                          .committed = start_committed,
                                          .aborted = replay_aborted};
const pcd_job_ops pcd_job_replay_claim = {.name = "replay_claim",
                                          .run = op_claim,
                                          .committed = claim_committed,
                                          .aborted = replay_aborted};
const pcd_job_ops pcd_job_replay_sync = {
    .name = "replay_sync", .run = op_sync, .committed = sync_committed, .aborted = replay_aborted};
