/* The replay state every thread shares (replay.h): which replay is under
 * way and where its order stands, the items handed out, what waits for
 * the writer, and the progress Stats shows. Everything here runs under
 * replay->lock, but pcd_replay_stages, which reads a setting. */
#include "replay.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/clock.h"
#include "common/log.h"
#include "store.h"

int pcd_replay_stages(const pcd_replay *rp) { return rp && rp->stages; }

void pcd_replay_txn_enter(pcd_replay *rp) {
  if (rp->txn_held)
    return;
  pthread_mutex_lock(&rp->lock);
  rp->saved = rp->st;
  rp->txn_held = 1;
}

void pcd_replay_txn_leave(pcd_replay *rp, int committed) {
  if (!rp->txn_held)
    return;
  if (!committed) {
    rp->st = rp->saved;
  } else if (rp->st.n_bad_written) {
    /* The bad records the transaction wrote leave the queue. */
    unsigned n = rp->st.n_bad_written;
    memmove(rp->st.pending_bad, rp->st.pending_bad + n,
            (rp->st.n_pending_bad - n) * sizeof *rp->st.pending_bad);
    rp->st.n_pending_bad -= n;
    rp->st.n_bad_written = 0;
  }
  rp->txn_held = 0;
  pthread_mutex_unlock(&rp->lock);
}

/* The rate decayed to now: exp(-dt/tau) for the time since the last note. */
static double fg_rate_now(const pcd_replay *rp, uint64_t now) {
  double dt = now > rp->fg.last_us ? (double)(now - rp->fg.last_us) : 0;
  return rp->quiet_us ? rp->fg.rate * exp(-dt / (double)rp->quiet_us) : 0;
}

void pcd_replay_fg_note(pcd_replay *rp, const uint8_t *key, const char *app, size_t pipelines,
                        uint64_t now) {
  /* Each pipeline adds 1/tau: a steady r a second settles at r. */
  rp->fg.rate =
      fg_rate_now(rp, now) + (rp->quiet_us ? (double)pipelines * 1e6 / (double)rp->quiet_us : 0);
  rp->fg.last_us = now;
  if (app && *app) {
    snprintf(rp->fg.app, sizeof rp->fg.app, "%s", app);
    memcpy(rp->fg.key, key, PCACHE_DEVKEY_SIZE);
    rp->fg.seq++;
  }
}

void pcd_replay_forget_keys(pcd_replay *rp) {
  if (!rp)
    return;
  pthread_mutex_lock(&rp->fg.lock);
  rp->fg.n_seen = 0;
  pthread_mutex_unlock(&rp->fg.lock);
}

int pcd_replay_fg_busy(pcd_replay *rp, uint64_t now) {
  int busy;
  pthread_mutex_lock(&rp->fg.lock);
  busy = fg_rate_now(rp, now) >= rp->busy_rate;
  /* The app that runs now on the new key goes first. */
  if (rp->fg.seq != rp->st.boost_seq) {
    rp->st.boost_seq = rp->fg.seq;
    if (rp->st.active && memcmp(rp->st.rec.new_key, rp->fg.key, PCACHE_DEVKEY_SIZE) == 0 &&
        !(rp->st.boost && strcmp(rp->st.boost_app, rp->fg.app) == 0)) {
      snprintf(rp->st.boost_app, sizeof rp->st.boost_app, "%s", rp->fg.app);
      rp->st.boost = 1;
      rp->st.boost_has_after = 0;
    }
  }
  pthread_mutex_unlock(&rp->fg.lock);
  return busy;
}

int pcd_replay_in_flight(const pcd_replay *rp, const pcache__hash *h) {
  for (unsigned i = 0; i < rp->st.n_flight; i++)
    if (memcmp(rp->st.flight[i].hash.bytes, h->bytes, PCACHE_HASH_SIZE) == 0)
      return 1;
  for (unsigned i = 0; i < rp->st.n_retry; i++)
    if (memcmp(rp->st.retry[i].bytes, h->bytes, PCACHE_HASH_SIZE) == 0)
      return 1;
  return 0;
}

int pcd_replay_land(pcd_replay *rp, const pcache__hash *h) {
  for (unsigned i = 0; i < rp->st.n_flight; i++)
    if (memcmp(rp->st.flight[i].hash.bytes, h->bytes, PCACHE_HASH_SIZE) == 0) {
      rp->st.flight[i] = rp->st.flight[--rp->st.n_flight];
      if (rp->st.n_flight == 0)
        rp->st.retry_in_flight = 0;
      return 1;
    }
  return 0;
}

void pcd_replay_queue_bad(pcd_replay *rp, const pcache__hash *h, const char *reason) {
  pcd_replay_bad *b;
  if (!rp->st.active || rp->st.n_pending_bad == PCD_REPLAY_MAX_PENDING_BAD)
    return;
  b = &rp->st.pending_bad[rp->st.n_pending_bad++];
  memcpy(b->old_key, rp->st.rec.old_key, PCACHE_DEVKEY_SIZE);
  memcpy(b->new_key, rp->st.rec.new_key, PCACHE_DEVKEY_SIZE);
  b->hash = *h;
  snprintf(b->reason, sizeof b->reason, "%s", reason);
  rp->st.failed++;
}

void pcd_replay_no_device(pcd_replay *rp, const uint8_t *key) {
  if (pcd_replay_device_missing(rp, key))
    return;
  if (rp->n_no_device == PCD_REPLAY_NO_DEVICE_MAX)
    memmove(rp->no_device[0], rp->no_device[1], --rp->n_no_device * PCACHE_DEVKEY_SIZE);
  memcpy(rp->no_device[rp->n_no_device++], key, PCACHE_DEVKEY_SIZE);
}

int pcd_replay_device_missing(const pcd_replay *rp, const uint8_t *key) {
  for (unsigned i = 0; i < rp->n_no_device; i++)
    if (memcmp(rp->no_device[i], key, PCACHE_DEVKEY_SIZE) == 0)
      return 1;
  return 0;
}

void pcd_replay_unload(pcd_replay *rp) {
  rp->st.active = 0;
  rp->st.boost = rp->st.cur = rp->st.lru_has_before = 0;
  rp->st.n_flight = rp->st.n_retry = 0;
  rp->st.retry_in_flight = 0;
  rp->st.finished_now = 0;
}

/* ------------------------------------------------------------- progress */

typedef struct progress_ctx {
  pcd_replay *rp;
  pcd_txn *txn;
  pcache__arena *arena;
  Pcachepb__ReplayProgress **items;
  size_t n, cap;
  Pcachepb__ReplayProgress *cur;
  size_t cap_fail;
} progress_ctx;

/* The first few failures of a replay: enough to name them in status. */
#define PROGRESS_MAX_FAILURES 16

static int add_failure(void *ctx, const pcache__hash *h, const char *reason, size_t len) {
  progress_ctx *p = ctx;
  Pcachepb__ReplayProgress *it = p->cur;
  Pcachepb__ReplayFailure *f;
  void *grown;
  if (it->n_failures == PROGRESS_MAX_FAILURES)
    return 1;
  f = pcache__arena_alloc(p->arena, sizeof *f);
  grown = pcache__arena_grow(p->arena, it->failures, it->n_failures, &p->cap_fail, sizeof *f);
  if (!f || !grown)
    return -ENOMEM;
  it->failures = grown;
  pcachepb__replay_failure__init(f);
  f->state_hash.data = pcache__arena_memdup(p->arena, h->bytes, PCACHE_HASH_SIZE);
  f->state_hash.len = PCACHE_HASH_SIZE;
  f->reason = pcache__arena_alloc(p->arena, len + 1);
  if (!f->state_hash.data || !f->reason)
    return -ENOMEM;
  memcpy(f->reason, reason, len);
  f->reason[len] = '\0';
  it->failures[it->n_failures++] = f;
  return 0;
}

static int add_progress(void *ctx, const pcd_replay_record *rec) {
  progress_ctx *p = ctx;
  pcd_replay *rp = p->rp;
  Pcachepb__ReplayProgress *it = pcache__arena_alloc(p->arena, sizeof *it);
  void *grown = pcache__arena_grow(p->arena, p->items, p->n, &p->cap, sizeof *p->items);
  int live = rp->st.active && memcmp(rec->old_key, rp->st.rec.old_key, PCACHE_DEVKEY_SIZE) == 0 &&
             memcmp(rec->new_key, rp->st.rec.new_key, PCACHE_DEVKEY_SIZE) == 0;
  int r;
  if (!it || !grown)
    return -ENOMEM;
  p->items = grown;
  pcachepb__replay_progress__init(it);
  it->old_key.data = pcache__arena_memdup(p->arena, rec->old_key, PCACHE_DEVKEY_SIZE);
  it->new_key.data = pcache__arena_memdup(p->arena, rec->new_key, PCACHE_DEVKEY_SIZE);
  if (!it->old_key.data || !it->new_key.data)
    return -ENOMEM;
  it->old_key.len = it->new_key.len = PCACHE_DEVKEY_SIZE;
  it->finished = rec->state == PCD_REPLAY_FINISHED;
  it->total = rec->total;
  it->done = rec->done;
  it->failed = rec->failed;
  if (live) {
    uint64_t now = pcache__mono_us(), since = now - rp->st.load_us;
    uint64_t rate_done = rp->st.done - rp->st.done_at_load;
    uint64_t left =
        rp->st.total > rp->st.done + rp->st.failed ? rp->st.total - rp->st.done - rp->st.failed : 0;
    it->total = rp->st.total;
    it->done = rp->st.done;
    it->failed = rp->st.failed;
    it->running = rp->running;
    it->replayer_pid = rp->running ? rp->pid : 0;
    if (rp->running) {
      const char *slash = strrchr(rp->replayer_path, '/');
      it->replayer_name = pcache__arena_strdup(p->arena, rp->exe_name[0] ? rp->exe_name
                                                         : slash         ? slash + 1
                                                                         : rp->replayer_path);
    }
    it->restarts = rp->restarts;
    if (rate_done && since)
      it->eta_s = (uint64_t)((double)left * (double)since / (double)rate_done / 1e6) + 1;
    if (rp->st.paused[0])
      it->paused = pcache__arena_strdup(p->arena, rp->st.paused);
    else if (rp->gave_up)
      it->paused = pcache__arena_strdup(p->arena, rp->gave_up_why);
  } else if (rec->state == PCD_REPLAY_PENDING) {
    /* Not loaded: its record is counted only when it finishes, and a
     * total of 0 reads as "100% 0/0 done" for a replay not begun (a second
     * device's, while the first one's runs). What it has to build is the
     * old key's entries. */
    pcd_device dev;
    if ((r = pcd_device_get(p->txn, rec->old_key, &dev)) < 0 && r != PCACHE_ENOT_FOUND)
      return r;
    if (r == 0 && dev.entries > it->total)
      it->total = dev.entries;
  }
  p->cur = it;
  p->cap_fail = 0;
  r = pcd_replay_bad_foreach(p->txn, rec->old_key, rec->new_key, add_failure, p);
  if (r < 0)
    return r;
  p->items[p->n++] = it;
  return 0;
}

int pcd_replay_progress(pcd_replay *rp, pcd_txn *txn, pcache__arena *arena,
                        Pcachepb__ReplayProgress ***ret_items, size_t *ret_n) {
  progress_ctx p = {.rp = rp, .txn = txn, .arena = arena};
  int r;
  if (!rp) {
    *ret_items = NULL;
    *ret_n = 0;
    return 0;
  }
  pthread_mutex_lock(&rp->lock);
  r = pcd_replay_records_foreach(txn, add_progress, &p);
  pthread_mutex_unlock(&rp->lock);
  if (r < 0)
    return r;
  *ret_items = p.items;
  *ret_n = p.n;
  return 0;
}
