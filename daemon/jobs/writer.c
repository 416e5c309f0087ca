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
  pcache__arena_free(&job->arena);
  pcd_out_release(&job->out);
  if (job->ops->free_slices)
    job->ops->free_slices(job);
  pcache__free(job);
}

static void reset_job(pcd_job *job) {
  pcache__arena_free(&job->arena);
  pcachepb__response__init(&job->resp);
  job->stored = job->rejected = job->evicted = 0;
}

/* Deletes per transaction when making room in a full map: each must fit
 * in what the map has left, which one evicting half the store would not
 * (it copies every page it touches). */
#define EVICT_CHUNK 16
/* At start, down to a smaller --max-size: larger while commits fit. */
#define START_CHUNK 1024

/* A commit that found no room: a full map (PCACHE_EFULL), or a full file
 * system that data.mdb cannot grow on (-ENOSPC, pcd_txn_commit). Both are
 * answered the same way: smaller transactions, after a nudge. */
static int no_room(int r) { return r == PCACHE_EFULL || r == -ENOSPC; }

/* Notes why writes do not fit (Stats says it), logging the change once:
 * a full disk fails every commit that grows data.mdb. */
static void set_full(pcd_writer *w, pcd_full full) {
  pcd_full was = (pcd_full)atomic_exchange(&w->stats->full, (int)full);
  if (full == was)
    return;
  if (full == PCD_FULL_DISK)
    log_warn("store: the file system holding the store is full: data.mdb cannot grow, so new "
             "entries now replace the least recently used ones. Free space on that file "
             "system, or make room in the store with `pcachectl purge --all` (or --app NAME, "
             "--older-than 30d); data.mdb keeps its size and reuses the room");
  else if (full == PCD_FULL_STORE)
    log_warn("store: the store is full and nothing could be evicted; run `pcachectl purge "
             "--all`, or restart pcached with a larger --max-size");
  else
    log_info("store: there is room for writes again");
}

/* Evicts, oldest first, in short transactions until the store holds at
 * most target bytes. A chunk that finds no room even to delete is
 * retried after a nudge (pcd_store_nudge), which makes the pages the last
 * commit freed usable. Returns 0 when something went, PCACHE_EFULL when
 * nothing could, or a store error. */
static int make_room(pcd_writer *w, uint64_t target, uint64_t max_chunk) {
  uint64_t deleted = 0, chunk = max_chunk;
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
    if (no_room(r) && nudges < 8) {
      /* Smaller, after a nudge; larger again once one commits. */
      nudges++;
      chunk = chunk > 1 ? chunk / 2 : 1;
      pcd_store_nudge(w->store);
      continue;
    }
    if (r < 0)
      return deleted ? 0 : r;
    nudges = 0;
    chunk = chunk * 2 < max_chunk ? chunk * 2 : max_chunk;
    atomic_fetch_add(&w->stats->evictions, n);
    deleted += n + 1;
  }
  return deleted ? 0 : PCACHE_EFULL;
}

/* What the store holds, as the cap counts it. */
static int capped_bytes(pcd_writer *w, uint64_t *ret) {
  pcd_totals t;
  pcd_txn *txn;
  int r = pcd_txn_begin(w->store, 0, &txn);
  if (r < 0)
    return r;
  r = pcd_totals_get(txn, &t);
  pcd_txn_abort(txn);
  if (r == 0)
    *ret = t.bytes + t.snapshot_bytes;
  return r;
}

/* The answer to a commit that found no room: a full map halves what the
 * store holds; a full disk evicts an eighth, which the store's file then
 * reuses (it cannot grow, and the rest of the cache is worth keeping). */
static int evict_for_room(pcd_writer *w, int why) {
  uint64_t bytes = 0;
  int r = capped_bytes(w, &bytes);
  if (r < 0)
    return r;
  return make_room(w, why == -ENOSPC ? bytes - bytes / 8 : bytes / 2, EVICT_CHUNK);
}

static void aborted(pcd_job *batch) {
  for (pcd_job *j = batch; j; j = j->next)
    if (j->ops->aborted)
      j->ops->aborted(j);
}

/* Runs the jobs of batch in one transaction, once: 0 when it committed,
 * else the failure (the jobs were told it was aborted). */
static int run_once(pcd_writer *w, pcd_job *batch) {
  pcd_txn *txn;
  int r = pcd_txn_begin(w->store, 1, &txn);
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
  return r;
}

static int stored_any(const pcd_job *batch) {
  for (const pcd_job *j = batch; j; j = j->next)
    if (j->stored)
      return 1;
  return 0;
}

/* Runs one batch in one transaction. When the commit finds no room the
 * batch is undone, room is made by evicting, and the batch runs again.
 * With nothing left to evict, what the last commits freed (a purge's,
 * say) becomes usable after two nudges: LMDB reuses a page only two
 * commits after the one that freed it. */
static int run_batch(pcd_writer *w, pcd_job *batch) {
  int r = 0, why = 0;
  for (int attempt = 0; attempt < MAX_RETRIES; attempt++) {
    int e;
    if ((r = run_once(w, batch)) == 0) {
      /* Stored at the first try: there is room again, unless the disk is
       * still full and this only fit in room an eviction made. */
      if (attempt == 0 && stored_any(batch) &&
          (atomic_load(&w->stats->full) != PCD_FULL_DISK || !pcd_store_disk_low(w->store)))
        set_full(w, PCD_FULL_NONE);
      return 0;
    }
    if (!no_room(r))
      return r;
    why = r;
    if (why == -ENOSPC)
      set_full(w, PCD_FULL_DISK);
    else
      log_warn("store: map full; evicting before retrying the commit");
    if ((e = evict_for_room(w, why)) == PCACHE_EFULL) {
      pcd_store_nudge(w->store);
      e = pcd_store_nudge(w->store);
      if (no_room(e))
        break;
    } else if (e < 0) {
      return e;
    }
  }
  if (why == PCACHE_EFULL)
    set_full(w, PCD_FULL_STORE);
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

/* A job whose batch is over: back to the queue, behind what others queued
 * meanwhile, while it has more slices; else done. */
static void requeue_or_done(pcd_writer *w, pcd_job *j, int r) {
  if (r == 0 && j->more)
    pcd_writer_submit(w, j);
  else
    w->done(j);
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
    requeue_or_done(w, j, r);
  }
  pcache_queue_append(batch, &rest);
}

/* Most items an alone job (Purge) handles in one transaction, and the
 * most nudges one slice gets when it finds no room. */
#define SLICE_ITEMS 1024
#define SLICE_NUDGES 12

/* Jobs that run alone (Purge), each slice in a transaction of its own of
 * at most job->slice_items items: on a full disk or map, deleting needs
 * new pages too, which a small transaction finds among those the last
 * commits freed. A slice that finds no room is halved (down to one item)
 * and retried after a nudge; once one commits they grow again. The job
 * goes back to the queue, behind what arrived meanwhile, while it has
 * more. */
static void run_alone(pcd_writer *w, job_queue *batch) {
  job_queue rest;
  pcd_job *j;
  pcache_queue_init(&rest);
  while ((j = pcache_queue_pop(batch)) != NULL) {
    int r, nudges = 0;
    if (!j->ops->alone) {
      pcache_queue_push(&rest, j);
      continue;
    }
    if (!j->slice_items)
      j->slice_items = SLICE_ITEMS;
    while (no_room(r = run_once(w, j)) && nudges++ < SLICE_NUDGES) {
      j->slice_items = j->slice_items > 1 ? j->slice_items / 2 : 1;
      pcd_store_nudge(w->store);
    }
    if (r == 0 && j->slice_items < SLICE_ITEMS)
      j->slice_items *= 2;
    if (r == -ENOSPC)
      set_full(w, PCD_FULL_DISK);
    else if (r == 0 && !j->more)
      set_full(w, PCD_FULL_NONE); /* it made room in the store */
    finish_batch(w, j, r);
    requeue_or_done(w, j, r);
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
    run_alone(w, &batch);
    if (pcache_queue_empty(&batch)) {
      pthread_mutex_lock(&w->lock);
      continue;
    }
    r = run_batch(w, batch.head);
    finish_batch(w, batch.head, r);
    /* Straight to the connection's own I/O thread: no hop through a
     * central loop between the commit and the reply. */
    while ((j = pcache_queue_pop(&batch)) != NULL)
      requeue_or_done(w, j, r);

    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

int pcd_writer_start(pcd_store *store, const pcd_config *config, pcd_stats *stats,
                     pcd_job_done_cb done, pcd_writer **ret_writer) {
  pcd_writer *w;
  uint64_t bytes;
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
  /* A store over the cap (the daemon restarted with a smaller
   * --max-size) is cut down to it before serving, in transactions small
   * enough to commit on a full disk, which is what the smaller cap is
   * often for. */
  if ((r = capped_bytes(w, &bytes)) == 0 && bytes > config->max_size) {
    r = make_room(w, config->max_size, START_CHUNK);
    log_info("store: %llu bytes over --max-size %llu at start; evicted down to it: %s",
             (unsigned long long)(bytes - config->max_size), (unsigned long long)config->max_size,
             r < 0 ? pcache_strerror(r) : "done");
  }
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
