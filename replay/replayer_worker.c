/* pcache-replay's worker threads (docs/replay.md "The replayer"): each
 * claims an item at a time from pcached (ReplayClaim, which carries the
 * results of builds that failed), builds it on the device (replay_vk.c)
 * while the claim for the next one is answered, and hands the blob to the
 * uploader (uploader.c), at most one upload behind it; under CPU pressure
 * or a throttle, one build at a time and a pause after each; past the
 * memory bound it reports what it did and stops.
 *
 * Its own file because it is the claim, build and upload loop, apart from
 * the program's start and end (replayer.c, which starts these threads) and
 * the process helpers below both (replayer_proc.c). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "replay/replayer.h"

static void sleep_ms(uint32_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* Under w->lock. A result past RESULTS_MAX cannot happen (a claim
 * reports each before the next item comes); were it to, the item stays in
 * flight at the daemon and is handed out again after this replayer. */
static void add_result(worker *w, const uint8_t *hash, int status, const char *msg) {
  size_t i = w->n_results;
  if (i == RESULTS_MAX)
    return;
  memcpy(w->result_hash[i], hash, PCACHE_HASH_SIZE);
  w->result_status[i] = status;
  snprintf(w->result_msg[i], sizeof w->result_msg[i], "%s", msg ? msg : "");
  w->n_results++;
}

/* The uploader's thread: an item of w's is stored, or refused (and
 * reported either way). */
static void upload_done(void *ctx, int status) {
  worker *w = ctx;
  if (status == 0)
    atomic_fetch_add(&w->rp->built, 1);
  pthread_mutex_lock(&w->lock);
  w->outstanding--;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

/* Waits until w has no more than max items at the uploader. */
static void wait_uploads(worker *w, unsigned max) {
  uint64_t t0 = pcache__mono_ns();
  pthread_mutex_lock(&w->lock);
  while (w->outstanding > max)
    pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
  w->wait_ns += pcache__mono_ns() - t0;
}

static void build_item(worker *w, const Pcachepb__ReplayItem *item) {
  replayer *rp = w->rp;
  uint8_t *blob = NULL;
  size_t size = 0;
  uint64_t ns = 0;
  char msg[RESULT_MSG_SIZE];
  const char *fix;
  int r;
  pcache__replay_test_hooks(rp, item);
  if (rp->delay_ms)
    sleep_ms(rp->delay_ms);
  w->items++;
  r = pcache__replay_vk_build(rp->vk, w->modules, rp->keep, item->desc.data, item->desc.len,
                              item->modules, item->n_modules, item->seed.data, item->seed.len,
                              &blob, &size, &ns, &w->times);
  if (r == 0) {
    /* The previous item's Put had this build's time to land. */
    wait_uploads(w, 0);
    pthread_mutex_lock(&w->lock);
    w->outstanding++;
    pthread_mutex_unlock(&w->lock);
    r = pcache__replay_uploader_queue(rp->uploader, item, blob, size, ns, upload_done, w);
    if (r == 0) {
      w->uploaded = 1;
      return;
    }
    snprintf(msg, sizeof msg, "upload failed: %s", pcache_strerror(r));
    pthread_mutex_lock(&w->lock);
    w->outstanding--;
    add_result(w, item->state_hash.data, r, msg);
    pthread_mutex_unlock(&w->lock);
    return;
  }
  pcache__free(blob);
  if (r == -ENOMEM && pcache__replay_near_memory_limit()) {
    /* Not reported: the item stays out, and pcached blames it once it
     * does this alone (other threads' builds took memory beside it). */
    log_error("replay: a build ran out of memory under the limit pcached set "
              "(PCACHE_REPLAY_MEM_LIMIT_MB); exiting");
    atomic_store(&rp->out_of_memory, 1);
    atomic_store(&rp->stop, 1);
    return;
  }
  /* pcachectl status shows it: what to do, where there is something. */
  fix = pcache__replay_vk_fix(r);
  snprintf(msg, sizeof msg, "build failed: %s%s%s", pcache_strerror(r), fix ? "; " : "",
           fix ? fix : "");
  pthread_mutex_lock(&w->lock);
  add_result(w, item->state_hash.data, r, msg);
  pthread_mutex_unlock(&w->lock);
}

/* One ReplayClaim: reports the results gathered so far and leaves the
 * daemon's answer in *reply (released by the caller in every case). When
 * build is not NULL, that item is built while the daemon answers: the
 * claim's round trip (a writer job, which may wait behind a Put's
 * commit) is then off the build path. Returns 0 or a failure of the
 * exchange (the item is built all the same). */
static int claim(worker *w, int last, const Pcachepb__ReplayItem *build, pcache__reply *reply) {
  replayer *rp = w->rp;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplayClaim c = PCACHEPB__REPLAY_CLAIM__INIT;
  Pcachepb__ReplayResult results[RESULTS_MAX], *ptrs[RESULTS_MAX];
  uint8_t hashes[RESULTS_MAX][PCACHE_HASH_SIZE];
  char msgs[RESULTS_MAX][RESULT_MSG_SIZE];
  uint64_t t0, t1 = 0, t2 = 0;
  size_t n;
  int r;
  *reply = (pcache__reply){0};
  pthread_mutex_lock(&w->lock);
  n = w->n_results;
  for (size_t i = 0; i < n; i++) {
    pcachepb__replay_result__init(&results[i]);
    memcpy(hashes[i], w->result_hash[i], PCACHE_HASH_SIZE);
    memcpy(msgs[i], w->result_msg[i], sizeof msgs[i]);
    results[i].state_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, hashes[i]};
    results[i].status = w->result_status[i];
    results[i].message = msgs[i];
    ptrs[i] = &results[i];
  }
  w->n_results = 0;
  pthread_mutex_unlock(&w->lock);
  c.new_key.data = rp->key.bytes;
  c.new_key.len = PCACHE_DEVKEY_SIZE;
  c.results = n ? ptrs : NULL;
  c.n_results = n;
  c.last = last;
  req.body_case = PCACHEPB__REQUEST__BODY_REPLAY_CLAIM;
  req.replay_claim = &c;
  t0 = pcache__mono_ns();
  r = pcache__transport_send(w->t, &req, pcache__mono_ms() + RPC_TIMEOUT_MS);
  if (build) {
    t1 = pcache__mono_ns();
    build_item(w, build);
    t2 = pcache__mono_ns();
  }
  if (r == 0)
    r = pcache__transport_recv(w->t, PCACHEPB__RESPONSE__BODY_REPLAY_CLAIM,
                               pcache__mono_ms() + RPC_TIMEOUT_MS, reply);
  w->claim_ns += pcache__mono_ns() - t0 - (t2 - t1);
  if (r < 0)
    log_error("replay: claim: %s", pcache__reply_why(reply, r));
  return r;
}

/* What a claim's answer asks of the thread. Returns the item to build
 * next (valid until reply is released), or NULL. */
static const Pcachepb__ReplayItem *take_answer(worker *w, int last, const pcache__reply *reply) {
  replayer *rp = w->rp;
  const Pcachepb__ReplayClaimReply *cr = reply->response->replay_claim;
  if (cr->item && !last)
    return cr->item;
  if (cr->finished || last) {
    w->done = 1;
    if (cr->finished)
      atomic_store(&rp->finished, 1);
  } else if (cr->wait_ms) {
    uint64_t t0 = pcache__mono_ns();
    sleep_ms(cr->wait_ms);
    w->slept_ns += pcache__mono_ns() - t0;
  }
  return NULL;
}

static int has_results(worker *w) {
  int n;
  pthread_mutex_lock(&w->lock);
  n = w->n_results != 0;
  pthread_mutex_unlock(&w->lock);
  return n;
}

/* A thread: claims and builds until the daemon has nothing more for it.
 * It holds at most one item it has not built (the answer to a claim sent
 * while it built the last one). Under CPU pressure or a throttle it
 * claims only when it has nothing to build: one build at a time, and a
 * pause after each. */
void *pcache__replay_worker_main(void *arg) {
  worker *w = arg;
  replayer *rp = w->rp;
  pcache__reply held = {0}; /* the answer holding the next item */
  const Pcachepb__ReplayItem *next = NULL;
  for (;;) {
    pcache__reply reply;
    int r;
    if (w->done && !next) {
      /* Nothing more for this thread: its last upload ends first, and
       * a result not yet reported goes to the daemon (which may then
       * hand out more: a retry). The daemon ends the replay at a claim
       * that finds nothing left and nothing out: after this thread's
       * last upload has landed, it asks once more. */
      wait_uploads(w, 0);
      if (!has_results(w) && !w->uploaded)
        break;
      w->uploaded = 0;
      w->done = 0;
    }
    if (pcache__replay_uploader_broken(rp->uploader))
      atomic_store(&rp->failed, 1); /* as a claim that lost the daemon */
    if (atomic_load(&rp->failed))
      break;
    if (atomic_load(&rp->stop) || (rp->max_rss && pcache__replay_rss_bytes() > rp->max_rss)) {
      /* An item held and not built stays in flight: handed out again. */
      atomic_store(&rp->stop, 1);
      wait_uploads(w, 0);
      if (claim(w, 1, NULL, &reply) == 0)
        w->done = 1;
      pcache__reply_release(&reply);
      break;
    }
    /* Under CPU pressure one thread builds, with a pause after each. */
    if (!next && w->index > 0 && atomic_load(&rp->pressured)) {
      if (atomic_load(&rp->finished)) {
        w->done = 1; /* its last upload, if any, is reported above */
        continue;
      }
      sleep_ms(500);
      continue;
    }
    if (next && (atomic_load(&rp->pressured) || atomic_load(&rp->throttle_ms) || w->done)) {
      /* Build what it holds, and claim (if at all) only after. */
      build_item(w, next);
      pcache__reply_release(&held);
      next = NULL;
    } else {
      const Pcachepb__ReplayItem *build = next;
      r = claim(w, 0, build, &reply);
      if (build) {
        pcache__reply_release(&held);
        next = NULL;
      }
      if (r < 0) {
        pcache__reply_release(&reply);
        atomic_store(&rp->failed, 1);
        break;
      }
      if ((next = take_answer(w, 0, &reply)) != NULL)
        held = reply;
      else
        pcache__reply_release(&reply);
      if (!build)
        continue;
    }
    if (atomic_load(&rp->throttle_ms))
      sleep_ms(atomic_load(&rp->throttle_ms));
  }
  pcache__reply_release(&held);
  return NULL;
}
