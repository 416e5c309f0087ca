/* ReplayClaim: the replayer this daemon started reports what it built
 * (landed: done, or recorded bad), and is handed its next item in the
 * replay's order (fill_item: the old entry's description, modules and,
 * for a staged item, its seed), unless clients are busy, a retry must
 * go out alone, or the item is another program's; the replay finishes
 * when nothing is left and nothing is out. The replayer's own Puts land
 * their items here too (pcd_replay_put_landed). */
#include "ops_replay.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/clock.h"
#include "proto/desc_check.h"

/* Items a claim may pass over as unreadable before it answers "ask again"
 * (each is recorded as bad): a claim stays short whatever the store. */
#define CLAIM_MAX_SKIPS 64

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
  if (!(item->seed.data = pcache__arena_memdup(&job->arena, blob, size)))
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
  pcd_replay_entry_key(k, rp->st.rec.old_key, h);
  if ((r = pcd_entry_get(txn, k, &e)) < 0 || (r = pcd_desc_get(txn, k, &desc, &desc_size)) < 0)
    goto out_bad;
  if ((r = pcache__desc_check(desc, desc_size, h, e.kind, mods, &n_mods)) < 0)
    goto out_bad;
  item->old_key.data = pcache__arena_memdup(&job->arena, rp->st.rec.old_key, PCACHE_DEVKEY_SIZE);
  item->old_key.len = PCACHE_DEVKEY_SIZE;
  item->state_hash.data = pcache__arena_memdup(&job->arena, h->bytes, PCACHE_HASH_SIZE);
  item->state_hash.len = PCACHE_HASH_SIZE;
  item->app = pcache__arena_strdup(&job->arena, e.app);
  item->kind = (Pcachepb__EntryKind)e.kind;
  item->desc.data = pcache__arena_memdup(&job->arena, desc, desc_size);
  item->desc.len = desc_size;
  if ((r = fill_seed(rp, txn, job, k, &e, item)) < 0)
    return r;
  item->modules = pcache__arena_alloc(&job->arena, (n_mods + 1) * sizeof *item->modules);
  if (!item->modules)
    return -ENOMEM;
  for (size_t i = 0; i < n_mods; i++) {
    Pcachepb__Module *m = pcache__arena_alloc(&job->arena, sizeof *m);
    if (!m)
      return -ENOMEM;
    if ((r = pcd_module_get(txn, &mods[i], &code, &code_size)) < 0)
      goto out_bad;
    pcachepb__module__init(m);
    m->hash.data = pcache__arena_memdup(&job->arena, mods[i].bytes, PCACHE_HASH_SIZE);
    m->hash.len = PCACHE_HASH_SIZE;
    m->code.data = pcache__arena_memdup(&job->arena, code, code_size);
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

/* One result of the replayer's, from a claim's report or its own Put: an
 * item of ours in flight is done, or recorded bad; any other is not ours
 * (any more): an earlier replayer's, or another replay's. */
static void land(pcd_replay *rp, const ProtobufCBinaryData *state_hash, int status,
                 const char *message) {
  pcache__hash h;
  if (state_hash->len != PCACHE_HASH_SIZE)
    return;
  memcpy(h.bytes, state_hash->data, PCACHE_HASH_SIZE);
  if (!pcd_replay_land(rp, &h))
    return;
  rp->landed++;
  if (status == 0)
    rp->st.done++;
  else
    pcd_replay_queue_bad(rp, &h, message && *message ? message : pcache_strerror(status));
}

static int take_results(pcd_replay *rp, const Pcachepb__ReplayClaim *claim) {
  for (size_t i = 0; i < claim->n_results; i++)
    land(rp, &claim->results[i]->state_hash, claim->results[i]->status, claim->results[i]->message);
  return 0;
}

static int op_claim(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  pcd_replay *rp = pcd_replay_of(job);
  const Pcachepb__ReplayClaim *claim = job->req->replay_claim;
  Pcachepb__ReplayClaimReply *reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  Pcachepb__ReplayItem *item = pcache__arena_alloc(&job->arena, sizeof *item);
  struct pcd_replay_pick p = {.rp = rp, .txn = txn};
  uint64_t now = pcache__mono_us();
  char want[PCD_EXE_NAME_MAX + 1];
  /* The order as it was before the walk that found the item: put back
   * when the item is another program's (below). */
  pcd_replay_state *before = pcache__arena_alloc(&job->arena, sizeof *before);
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
  if ((r = pcd_replay_write_bad(rp, txn)) < 0)
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
      if ((r = pcd_replay_pending(&p, &p.found)) < 0)
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
      if ((r = pcd_replay_next_item(&p)) <= 0) {
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
    if ((r = pcd_replay_item_exe(rp, txn, &p.found, want)) < 0)
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

void pcd_replay_put_landed(pcd_job *job, const Pcachepb__Put *put,
                           const Pcachepb__PutReply *reply) {
  pcd_replay *rp = pcd_replay_of(job);
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
  for (size_t i = 0; i < put->n_items; i++)
    land(rp, &put->items[i]->state_hash, reply->results[i]->status, reply->results[i]->message);
}

static void claim_committed(pcd_job *job) {
  pcd_replay *rp = pcd_replay_committed_lock(job);
  if (!rp)
    return;
  if (rp->st.finished_now || rp->st.n_pending_bad)
    pcd_replay_wake(rp, 0, 1);
  pthread_mutex_unlock(&rp->lock);
}

const pcd_job_ops pcd_job_replay_claim = {.name = "replay_claim",
                                          .run = op_claim,
                                          .committed = claim_committed,
                                          .aborted = pcd_replay_job_aborted};
