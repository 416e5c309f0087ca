#include "writer.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "common/queue.h"
#include "eviction.h"
#include "jobs.h"
#include "proto/frame.h"
#include "remote_pack.h"

#define MAX_RETRIES 4

typedef PCACHE_QUEUE(pcd_job) job_queue;

struct pcd_writer {
  pcd_store *store;
  const pcd_config *config;
  pcd_stats *stats;
  pcd_job_done_cb done;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t cond;
  job_queue queue; /* waiting for the next commit */
  int stopping;
};

pcd_job *pcd_job_new(pcd_job_type type) {
  pcd_job *job = pcache__calloc(1, sizeof *job);
  if (!job)
    return NULL;
  job->type = type;
  job->ops = pcd_job_ops_of(type);
  job->out.fd = job->out.lease_fd = -1;
  pcachepb__response__init(&job->resp);
  return job;
}

void pcd_job_free(pcd_job *job) {
  if (!job)
    return;
  pcache__request_free(job->req);
  pcache__request_free(job->held);
  if (job->detected)
    pcachepb__replay_start_reply__free_unpacked(job->detected, &pcache__pb_allocator);
  pcd_push_free_all(job->pushes);
  pcache__free(job->touches);
  pcd_arena_free(&job->arena);
  pcd_out_release(&job->out);
  if (job->ops->free_slices)
    job->ops->free_slices(job);
  pcache__free(job);
}

static void reset_job(pcd_job *job) {
  pcd_arena_free(&job->arena);
  pcachepb__response__init(&job->resp);
  job->stored = job->rejected = job->evicted = 0;
}

/* Deletes per transaction when making room in a full map: each must fit
 * in what the map has left, which one evicting half the store would not
 * (it copies every page it touches). */
#define EVICT_CHUNK 16

/* Evicts, oldest first, in short transactions until the store holds at
 * most target bytes. A chunk that finds the map too full even to delete
 * is retried after a nudge (pcd_store_nudge), which makes the pages the
 * last commit freed usable. Returns 0 when something went, PCACHE_EFULL
 * when nothing could, or a store error. */
static int make_room(pcd_writer *w, uint64_t target) {
  uint64_t deleted = 0, chunk = EVICT_CHUNK;
  int nudges = 0;
  for (;;) {
    pcd_txn *txn;
    uint64_t n = 0, freed = 0;
    int r = pcd_txn_begin(w->store, 1, &txn);
    if (r < 0)
      return r;
    r = pcd_evict_some(txn, target, chunk, &n, &freed);
    if (r == 0 && n == 0 && freed == 0) {
      pcd_txn_abort(txn);
      break;
    }
    r = r < 0 ? (pcd_txn_abort(txn), r) : pcd_txn_commit(txn);
    if (r == PCACHE_EFULL && nudges < 8) {
      /* Smaller, after a nudge; larger again once one commits. */
      nudges++;
      chunk = chunk > 1 ? chunk / 2 : 1;
      if (pcd_store_nudge(w->store) == 0)
        continue;
    }
    if (r < 0)
      return deleted ? 0 : r;
    nudges = 0;
    chunk = chunk * 2 < EVICT_CHUNK ? chunk * 2 : EVICT_CHUNK;
    atomic_fetch_add(&w->stats->evictions, n);
    deleted += n + 1;
  }
  return deleted ? 0 : PCACHE_EFULL;
}

/* Halves what the store holds: the answer to a full map. */
static int halve_store(pcd_writer *w) {
  pcd_totals t;
  pcd_txn *txn;
  int r = pcd_txn_begin(w->store, 0, &txn);
  if (r < 0)
    return r;
  r = pcd_totals_get(txn, &t);
  pcd_txn_abort(txn);
  return r < 0 ? r : make_room(w, (t.bytes + t.snapshot_bytes) / 2);
}

static void aborted(pcd_job *batch) {
  for (pcd_job *j = batch; j; j = j->next)
    if (j->ops->aborted)
      j->ops->aborted(j);
}

/* Runs one batch in one transaction. On a map-full error the batch is
 * undone, room is made by evicting, and the batch runs again. */
static int run_batch(pcd_writer *w, pcd_job *batch) {
  int r = 0;
  for (int attempt = 0; attempt < MAX_RETRIES; attempt++) {
    pcd_txn *txn;
    r = pcd_txn_begin(w->store, 1, &txn);
    if (r < 0)
      return r;
    for (pcd_job *j = batch; j && r == 0; j = j->next) {
      reset_job(j);
      r = j->ops->run(txn, w->config, j);
      if (r == 0 && j->arena.failed)
        r = -ENOMEM;
    }
    if (r < 0) {
      pcd_txn_abort(txn);
    } else {
      r = pcd_txn_commit(txn);
      if (r == 0) {
        atomic_fetch_add(&w->stats->commits, 1);
        for (pcd_job *j = batch; j; j = j->next)
          if (j->ops->committed)
            j->ops->committed(j);
        return 0;
      }
    }
    aborted(batch);
    if (r != PCACHE_EFULL)
      return r;
    /* The map is full: halve what the store holds, then try again. */
    log_warn("store: map full; evicting before retrying the commit");
    if ((r = halve_store(w)) < 0)
      return r;
  }
  return r;
}

/* Hit batches can name every entry of a large store. LMDB keeps the dirty
 * pages of a transaction for reuse after it commits, so one transaction
 * for 50,000 hits would leave the daemon holding megabytes it never needs
 * again: they commit in chunks instead. They have no reply and nothing
 * waits on them, so the extra commits cost no one latency. */
#define PCD_TOUCHES_PER_TXN 2048

static int run_touches(pcd_writer *w, pcd_job *job) {
  pcd_touch *all = job->touches;
  size_t n = job->n_touches;
  int r = 0;
  for (size_t i = 0; i < n && r == 0; i += PCD_TOUCHES_PER_TXN) {
    job->touches = all + i;
    job->n_touches = n - i < PCD_TOUCHES_PER_TXN ? n - i : PCD_TOUCHES_PER_TXN;
    r = run_batch(w, job);
  }
  job->touches = all;
  job->n_touches = n;
  return r;
}

/* Takes the large hit batches out of batch (keeping their order) and
 * writes them first, chunk by chunk, as they were queued ahead of the rest. */
static void write_large_touches(pcd_writer *w, job_queue *batch) {
  job_queue rest;
  pcd_job *j;
  pcache_queue_init(&rest);
  while ((j = pcache_queue_pop(batch)) != NULL) {
    int r;
    if (j->type != PCD_JOB_TOUCH || j->n_touches <= PCD_TOUCHES_PER_TXN) {
      pcache_queue_push(&rest, j);
      continue;
    }
    if ((r = run_touches(w, j)) < 0)
      log_error("writer: writing hits failed: %s", pcache_strerror(r));
    w->done(j);
  }
  pcache_queue_append(batch, &rest);
}

static void finish_batch(pcd_writer *w, pcd_job *batch, int r) {
  for (pcd_job *j = batch; j; j = j->next) {
    int r_encode = 0;
    if (r < 0)
      log_error("writer: %s: transaction failed: %s", j->ops->name, pcache_strerror(r));
    if (j->ops->count)
      j->ops->count(j, w->stats, r < 0);
    if (!j->conn || (r == 0 && j->more))
      continue; /* no reply until its last slice */
    if (r == 0)
      r_encode =
          j->ops->encode ? j->ops->encode(j, &j->out) : pcd_reply_encode(&j->resp, NULL, &j->out);
    if (r < 0 || r_encode < 0) {
      /* The client hears why: the transaction's failure, or the encoder's
       * (-ENOMEM, or PCACHE_EFRAME_TOO_LARGE for a reply over the frame
       * limit). */
      pcd_out_release(&j->out);
      pcd_reply_error(r < 0 ? r : r_encode, NULL, &j->out);
    }
  }
}

/* Export only reads: each of its slices runs in a read transaction of its
 * own, outside the batch (nothing to undo or retry), and the job goes
 * back to the queue while it has more. */
static void run_reads(pcd_writer *w, job_queue *batch) {
  job_queue rest;
  pcd_job *j;
  pcache_queue_init(&rest);
  while ((j = pcache_queue_pop(batch)) != NULL) {
    pcd_txn *txn;
    int r;
    if (!j->ops->read_only) {
      pcache_queue_push(&rest, j);
      continue;
    }
    r = pcd_txn_begin(w->store, 0, &txn);
    if (r == 0) {
      reset_job(j);
      r = j->ops->run(txn, w->config, j);
      if (r == 0 && j->arena.failed)
        r = -ENOMEM;
      pcd_txn_abort(txn);
    }
    finish_batch(w, j, r);
    if (r == 0 && j->more)
      pcd_writer_submit(w, j);
    else
      w->done(j);
  }
  pcache_queue_append(batch, &rest);
}

static void *writer_main(void *arg) {
  pcd_writer *w = arg;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    job_queue batch;
    pcd_job *j;
    int r;
    while (pcache_queue_empty(&w->queue) && !w->stopping)
      pthread_cond_wait(&w->cond, &w->lock);
    if (pcache_queue_empty(&w->queue))
      break;
    pcache_queue_take_all(&batch, &w->queue);
    pthread_mutex_unlock(&w->lock);

    write_large_touches(w, &batch);
    run_reads(w, &batch);
    if (pcache_queue_empty(&batch)) {
      pthread_mutex_lock(&w->lock);
      continue;
    }
    r = run_batch(w, batch.head);
    finish_batch(w, batch.head, r);
    /* Straight to the connection's own I/O thread: no hop through a
     * central loop between the commit and the reply. */
    while ((j = pcache_queue_pop(&batch)) != NULL) {
      /* Its next slice goes behind what others queued meanwhile. */
      if (r == 0 && j->more)
        pcd_writer_submit(w, j);
      else
        w->done(j);
    }

    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

int pcd_writer_start(pcd_store *store, const pcd_config *config, pcd_stats *stats,
                     pcd_job_done_cb done, pcd_writer **ret_writer) {
  pcd_writer *w;
  int r;
  /* Before any write: the cap must see what an older store holds. */
  if ((r = pcd_store_count_sizes(store)) < 0)
    log_warn("store: cannot count module and device bytes: %s", pcache_strerror(r));
  w = pcache__calloc(1, sizeof *w);
  if (!w)
    return -ENOMEM;
  w->store = store;
  w->config = config;
  w->stats = stats;
  w->done = done;
  pcache_queue_init(&w->queue);
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->cond, NULL);
  if ((r = -pthread_create(&w->thread, NULL, writer_main, w)) < 0) {
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->cond);
    pcache__free(w);
    return r;
  }
  *ret_writer = w;
  return 0;
}

void pcd_writer_submit(pcd_writer *writer, pcd_job *job) {
  pthread_mutex_lock(&writer->lock);
  pcache_queue_push(&writer->queue, job);
  pthread_cond_signal(&writer->cond);
  pthread_mutex_unlock(&writer->lock);
}

void pcd_writer_stop(pcd_writer *writer) {
  if (!writer)
    return;
  pthread_mutex_lock(&writer->lock);
  writer->stopping = 1;
  pthread_cond_signal(&writer->cond);
  pthread_mutex_unlock(&writer->lock);
  pthread_join(writer->thread, NULL);
  pthread_mutex_destroy(&writer->lock);
  pthread_cond_destroy(&writer->cond);
  pcache__free(writer);
}
