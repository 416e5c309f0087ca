/* ReplayStart (`pcachectl replay`), and the start a client's new device
 * key sets off (pcd_replay_note): finds the stored keys it supersedes,
 * another driver build of the same device, and writes their replays'
 * records; then loads the first pending one, the client's app to go
 * first. A staged Put plans its items' replay here too (ops_replay.h). */
#include "ops_replay.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/log.h"

struct dev_list {
  pcache__arena *arena;
  pcd_device *v;
  size_t n, cap;
};

static int collect_device(void *ctx, const pcd_device *d) {
  struct dev_list *l = ctx;
  void *grown = pcache__arena_grow(l->arena, l->v, l->n, &l->cap, sizeof *l->v);
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
 * staged items (pcd_replay_put_stage), never found here. */
static int same_device(const uint8_t *a, const uint8_t *b) {
  pcache__devkey ka, kb;
  memcpy(ka.bytes, a, PCACHE_DEVKEY_SIZE);
  memcpy(kb.bytes, b, PCACHE_DEVKEY_SIZE);
  if (pcache__devkey_is_staged(&ka) || pcache__devkey_is_staged(&kb))
    return 0;
  return memcmp(a + 16, b + 16, 8) == 0 && memcmp(a + 28, b + 28, 4) == 0;
}

static int count_pending(void *ctx, const pcd_replay_record *rec) {
  if (rec->state == PCD_REPLAY_PENDING)
    (*(uint32_t *)ctx)++;
  return 0;
}

/* Pending replays to another build of the device a client names now: that
 * build is gone (a driver update, or a binary device's global pipeline
 * key that changed again), and its replay would only start a replayer
 * that finds no device (exit 3) at every start of pcached, and with more
 * such targets than pcd_replay_no_device remembers, one after another for
 * ever. The records to the key named now replace them (the loop in
 * op_start plans one from every stored kin). */
#define OBSOLETE_MAX 64
struct obsolete {
  const uint8_t *named;
  const pcd_replay *rp;
  pcd_replay_record v[OBSOLETE_MAX];
  unsigned n;
};

static int collect_obsolete(void *ctx, const pcd_replay_record *rec) {
  struct obsolete *o = ctx;
  if (rec->state != PCD_REPLAY_PENDING || !same_device(rec->new_key, o->named) ||
      memcmp(rec->new_key, o->named, PCACHE_DEVKEY_SIZE) == 0)
    return 0;
  if (o->rp->st.active &&
      memcmp(o->rp->st.rec.old_key, rec->old_key, PCACHE_DEVKEY_SIZE) == 0 &&
      memcmp(o->rp->st.rec.new_key, rec->new_key, PCACHE_DEVKEY_SIZE) == 0)
    return 0; /* under way: it ends as it would have (dropped then, if its
               * device is gone: ops_replay_sync.c) */
  o->v[o->n++] = *rec;
  return o->n == OBSOLETE_MAX;
}

int pcd_replay_retire_obsolete(pcd_txn *txn, const pcd_replay *rp, const uint8_t *named,
                               pcache__arena *arena) {
  struct obsolete *o = pcache__arena_alloc(arena, sizeof *o);
  int r;
  if (!o)
    return -ENOMEM;
  o->named = named;
  o->rp = rp;
  o->n = 0;
  if ((r = pcd_replay_records_foreach(txn, collect_obsolete, o)) < 0)
    return r;
  for (unsigned i = 0; i < o->n; i++) {
    char hex[65];
    pcache__devkey k;
    memcpy(k.bytes, o->v[i].new_key, PCACHE_DEVKEY_SIZE);
    pcache__devkey_format(&k, hex);
    log_info("replay: the pending replay to %s is dropped: a newer build of its device is named",
             hex);
    if ((r = pcd_replay_record_delete(txn, o->v[i].old_key, o->v[i].new_key)) < 0)
      return r;
  }
  return 0;
}

static int op_start(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  pcd_replay *rp = pcd_replay_of(job);
  const Pcachepb__ReplayStart *req = job->req ? job->req->replay_start : NULL;
  Pcachepb__ReplayStartReply *reply = NULL;
  struct dev_list l = {.arena = &job->arena};
  const uint8_t *only = req && req->device_key.len ? req->device_key.data : NULL;
  const char *boost = req ? req->app : job->app;
  int r, loaded;
  (void)cfg;
  if (job->conn) {
    if (!(reply = pcache__arena_alloc(&job->arena, sizeof *reply)))
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
      r = pcd_replay_plan(txn, old->key, new_key, req != NULL);
  }
  if (r >= 0 && !req)
    r = pcd_replay_retire_obsolete(txn, rp, job->device_key, &job->arena);
  if (r >= 0 && !req) {
    memcpy(rp->st.last_new_key, job->device_key, PCACHE_DEVKEY_SIZE);
    rp->st.have_last_new_key = 1;
  }
  if (r >= 0)
    r = loaded = pcd_replay_load_next(rp, txn);
  if (r >= 0 && loaded && boost && *boost) {
    snprintf(rp->st.boost_app, sizeof rp->st.boost_app, "%s", boost);
    rp->st.boost = 1;
    rp->st.boost_has_after = 0;
  }
  if (r >= 0)
    r = pcd_replay_plan_exe(rp, txn);
  if (r < 0)
    return r;
  if (reply)
    r = pcd_replay_records_foreach(txn, count_pending, &reply->plans);
  return r < 0 ? r : 0;
}

static void start_committed(pcd_job *job) {
  pcd_replay *rp = pcd_replay_committed_lock(job);
  if (!rp)
    return;
  if (job->req) { /* asked for: a replay that gave up tries again, now */
    rp->gave_up = 0;
    rp->failures_in_row = 0;
    rp->spawn_after_ms = 0;
    rp->n_no_device = 0;
  }
  if (rp->st.active)
    pcd_replay_wake(rp, 1, 0);
  pthread_mutex_unlock(&rp->lock);
}

/* A Put's hooks (pcd_replay_job_hooks, replay.h says what each does):
 * its staged items planned, and the replayer woken for them once it
 * commits. */
int pcd_replay_put_stage(pcd_job *job, pcd_txn *txn, const pcache__devkey *key, uint64_t added) {
  pcd_replay *rp = pcd_replay_of(job);
  pcache__devkey staged;
  int r;
  if (!rp)
    return 0;
  pcache__devkey_staged(key, &staged);
  pcd_replay_txn_enter(rp);
  /* Again when finished: these items came after it. */
  if ((r = pcd_replay_plan(txn, staged.bytes, key->bytes, 1)) < 0)
    return r;
  /* Under way already: its walk finds the new entries, so its total must
   * count them too, or status says more done than there are ("9/1 done")
   * and the finished record keeps the first Put's count. Added, not read
   * back from the staged key's record: entries evicted since the load
   * (a fleet's staged items go first) would make that count short. */
  if (rp->st.active && memcmp(rp->st.rec.old_key, staged.bytes, PCACHE_DEVKEY_SIZE) == 0 &&
      memcmp(rp->st.rec.new_key, key->bytes, PCACHE_DEVKEY_SIZE) == 0)
    rp->st.total += added;
  if ((r = pcd_replay_load_next(rp, txn)) >= 0)
    r = pcd_replay_plan_exe(rp, txn);
  return r < 0 ? r : 0;
}

void pcd_replay_put_settled(pcd_job *job, int committed) {
  pcd_replay *rp = pcd_replay_of(job);
  if (!rp)
    return;
  pcd_replay_txn_leave(rp, committed);
  if (!committed || !job->staged)
    return;
  pthread_mutex_lock(&rp->lock);
  if (rp->st.active)
    pcd_replay_wake(rp, 1, 0);
  pthread_mutex_unlock(&rp->lock);
}

const pcd_job_ops pcd_job_replay_start = {.name = "replay_start",
                                          .run = op_start,
                                          .committed = start_committed,
                                          .aborted = pcd_replay_job_aborted};
