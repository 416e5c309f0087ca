/* What the replay's writer jobs share (ops_replay.h): loading the replay
 * under way from its record, counting what is done from the store itself;
 * the records planned; the walk of its order, app by app (pick_*), which
 * ReplayClaim hands out and which the start and the sync look ahead on
 * for the program name the next replayer needs; the hooks every job's
 * table shares. */
#include "ops_replay.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

void pcd_replay_entry_key(uint8_t out[PCD_ENTRY_KEY_SIZE], const uint8_t *dev,
                          const pcache__hash *h) {
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

struct first_ctx {
  const pcd_replay *rp;
  pcd_replay_record rec;
};

static int first_pending(void *ctx, const pcd_replay_record *rec) {
  struct first_ctx *f = ctx;
  if (rec->state != PCD_REPLAY_PENDING || pcd_replay_device_missing(f->rp, rec->new_key))
    return 0;
  f->rec = *rec;
  return 1;
}

/* Loads the first pending replay when none is under way. Returns 1 when
 * one is under way afterwards, 0 when none, or an error. */
int pcd_replay_load_next(pcd_replay *rp, pcd_txn *txn) {
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
int pcd_replay_write_bad(pcd_replay *rp, pcd_txn *txn) {
  int r;
  for (unsigned i = 0; i < rp->st.n_pending_bad; i++) {
    const pcd_replay_bad *b = &rp->st.pending_bad[i];
    if ((r = pcd_replay_bad_put(txn, b->old_key, b->new_key, &b->hash, b->reason)) < 0)
      return r;
  }
  rp->st.n_bad_written = rp->st.n_pending_bad;
  return 0;
}

void pcd_replay_wake(pcd_replay *rp, int spawn, int sync) {
  rp->want_spawn |= spawn;
  rp->want_sync |= sync;
  if (rp->handles_ready && !rp->closing)
    uv_async_send(&rp->wake);
}

/* Records the replay old -> new unless it is there; a finished one is
 * taken up again only when asked (again). Returns 1 when pending now. */
int pcd_replay_plan(pcd_txn *txn, const uint8_t *old_key, const uint8_t *new_key, int again) {
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

/* ------------------------------------------------------------ hooks */

pcd_replay *pcd_replay_of(const pcd_job *job) { return job->ctx; }

void pcd_replay_job_aborted(pcd_job *job) {
  if (pcd_replay_of(job))
    pcd_replay_txn_leave(pcd_replay_of(job), 0);
}

pcd_replay *pcd_replay_committed_lock(pcd_job *job) {
  pcd_replay *rp = pcd_replay_of(job);
  if (rp) {
    pcd_replay_txn_leave(rp, 1);
    pthread_mutex_lock(&rp->lock);
  }
  return rp;
}

/* ------------------------------------------------------------ the order */

int pcd_replay_pending(struct pcd_replay_pick *p, const pcache__hash *h) {
  pcd_replay *rp = p->rp;
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  int r;
  if (pcd_replay_in_flight(rp, h))
    return 0;
  pcd_replay_entry_key(k, rp->st.rec.new_key, h);
  if ((r = pcd_entry_get(p->txn, k, &e)) != PCACHE_ENOT_FOUND)
    return r < 0 ? r : 0;
  r = pcd_replay_bad_get(p->txn, rp->st.rec.old_key, rp->st.rec.new_key, h);
  if (r != PCACHE_ENOT_FOUND)
    return r < 0 ? r : 0;
  return 1;
}

static int pick_in_app(void *ctx, const pcache__hash *h, pcache__hash *after, int *has_after) {
  struct pcd_replay_pick *p = ctx;
  int r = pcd_replay_pending(p, h);
  *after = *h;
  *has_after = 1;
  if (r > 0)
    p->found = *h;
  return r;
}

static int pick_boost(void *ctx, const pcache__hash *h) {
  struct pcd_replay_pick *p = ctx;
  return pick_in_app(ctx, h, &p->rp->st.boost_after, &p->rp->st.boost_has_after);
}

static int pick_cur(void *ctx, const pcache__hash *h) {
  struct pcd_replay_pick *p = ctx;
  return pick_in_app(ctx, h, &p->rp->st.cur_after, &p->rp->st.cur_has_after);
}

static int pick_lru(void *ctx, const uint8_t lru_key[PCD_LRU_KEY_SIZE]) {
  struct pcd_replay_pick *p = ctx;
  pcd_replay *rp = p->rp;
  pcache__hash h;
  pcd_entry e;
  int r;
  memcpy(rp->st.lru_before, lru_key, PCD_LRU_KEY_SIZE);
  rp->st.lru_has_before = 1;
  memcpy(h.bytes, lru_key + 8 + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  if ((r = pcd_replay_pending(p, &h)) <= 0)
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
int pcd_replay_next_item(struct pcd_replay_pick *p) {
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
int pcd_replay_item_exe(pcd_replay *rp, pcd_txn *txn, const pcache__hash *h,
                        char out[PCD_EXE_NAME_MAX + 1]) {
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  int r;
  out[0] = '\0';
  if (!atomic_load(&rp->as_program))
    return 0;
  pcd_replay_entry_key(k, rp->st.rec.old_key, h);
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
int pcd_replay_plan_exe(pcd_replay *rp, pcd_txn *txn) {
  struct pcd_replay_pick p = {.rp = rp, .txn = txn};
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
    r = pcd_replay_next_item(&p);
    rp->st = *before;
    pcache__free(before);
  }
  if (r <= 0) {
    rp->next_exe[0] = '\0';
    return r;
  }
  return pcd_replay_item_exe(rp, txn, &p.found, rp->next_exe);
}
