/* Uploads run on a thread of their own per device, never on the caller's
 * path: compiled pipelines are queued, batched into Put requests (the
 * queue, its bounds, the batches and their requests are the Put batcher's,
 * proto/put_batch.h), and kept (bounded) while the daemon is away, with a
 * growing pause between tries.
 * An item that can never go (larger than a request may be, refused by the
 * daemon) is dropped, said once and counted (upload_dropped), never
 * retried: retrying it would hold every pipeline queued behind it. */
#include <errno.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <string.h>
#include <time.h>

#include "client/device.h"
#include "client/prefetch.h"
#include "client/reports.h"
#include "client/segment.h"
#include "client/snapshot.h"
#include "client/upload.h"
#include "common/alloc.h"
#include "common/clock.h"

#define QUEUE_MAX PCACHE__UPLOAD_QUEUE_MAX
#define OUT_OF_STEP_MAX 3u
/* And in bytes: what the queued items own (blob and description; the
 * SPIR-V they name is shared with the context's objects). A daemon away
 * for long must not make the app hold gigabytes of uploads. */
#define QUEUE_MAX_BYTES (256ull << 20)
/* Small enough that a Put's transfer is a small part of its timeout
 * (pcache__client_background_timeout_ms) on a local socket. */
#define BATCH_MAX_BYTES (1u << 20)
#define BACKOFF_MIN_MS 50u
#define BACKOFF_MAX_MS 2000u

void pcache__upload_free(pcache__upload *item) {
  if (!item)
    return;
  for (size_t i = 0; i < item->n_modules; i++)
    pcache__module_unref(item->modules[i]);
  pcache__free(item->put.blob);
  pcache__free(item->put.desc);
  pcache__free(item);
}

/* The upload a queued item is (its first member). */
static pcache__upload *upload_of(pcache__put_item *item) { return (pcache__upload *)item; }

static void free_item(pcache__put_item *item) { pcache__upload_free(upload_of(item)); }

/* The largest request the daemon takes (HelloReply.max_frame; ours until
 * it has said). */
static uint64_t frame_limit(const pcache_device *d) {
  uint64_t f = atomic_load(&d->core.client->max_frame);
  return f >= PCACHE_FRAME_HEADER_SIZE && f <= UINT32_MAX ? f : PCACHE_DEFAULT_MAX_FRAME;
}

/* Why an item is dropped, for the log: each said once, then its repeats
 * held back (log.h). */
typedef enum drop_reason {
  DROP_TOO_LARGE,  /* larger than any request the daemon takes */
  DROP_QUEUE_FULL, /* the queue is at QUEUE_MAX or QUEUE_MAX_BYTES */
  DROP_REFUSED,    /* the daemon refused it: sending it again would not help */
} drop_reason;

/* Counts n items dropped and says why. Without the upload lock. */
static void dropped(pcache_device *d, size_t n, drop_reason why, uint64_t bytes, int status,
                    const char *message) {
  static const char site[] = "upload_dropped";
  atomic_fetch_add(&d->core.stats.upload_dropped, n);
  /* Under 200 bytes (log.h): what to do comes before the daemon's words. */
  switch (why) {
  case DROP_TOO_LARGE:
    pcache__log_limited(d->core.log, PCACHE_SEVERITY_WARNING, site, why, 0,
                        "a pipeline upload of %llu bytes is over pcached's request limit (%llu): "
                        "not uploaded, compiled again by each process; to cache it, raise "
                        "pcached's --max-frame",
                        (unsigned long long)bytes, (unsigned long long)frame_limit(d));
    break;
  case DROP_QUEUE_FULL:
    pcache__log_limited(d->core.log, PCACHE_SEVERITY_WARNING, site, why, 0,
                        "upload queue full (%u pipelines or %llu MiB pcached has not taken): "
                        "one dropped, compiled again next run; check that pcached answers "
                        "(pcachectl status)",
                        QUEUE_MAX, (unsigned long long)(QUEUE_MAX_BYTES >> 20));
    break;
  case DROP_REFUSED:
    pcache__log_limited(d->core.log, PCACHE_SEVERITY_WARNING, site, why, (uint64_t)(int64_t)status,
                        "pcached refused %zu pipeline upload%s, not retried (its log says why: "
                        "journalctl --user -u pcached): %s",
                        n, n == 1 ? "" : "s",
                        message && *message ? message : pcache_strerror(status));
    break;
  }
}

/* Only the upload thread reads or writes the sent set. */
static int module_sent(const pcache_device *d, const pcache__hash *hash) {
  for (size_t i = 0; i < d->upload.sent_modules.n; i++)
    if (pcache__hash_equal(&d->upload.sent_modules.items[i], hash))
      return 1;
  return 0;
}

static void module_mark_sent(pcache_device *d, const pcache__hash *hash) {
  if (module_sent(d, hash))
    return;
  /* Out of memory: sent again next time, wasteful, not wrong. */
  (void)pcache_vec_push(&d->upload.sent_modules, *hash);
}

/* The modules an item carries (pcache__put_modules_fn): code the daemon
 * already acknowledged stays home; otherwise every item carries what it
 * names (the daemon stores each hash once). */
static int add_modules(void *ctx, const pcache__put_item *item, Pcachepb__PutItem *out,
                       pcache__arena *a) {
  pcache_device *d = ctx;
  const pcache__upload *u = (const pcache__upload *)item;
  Pcachepb__Module *modules;
  if (!u->n_modules)
    return 0;
  modules = pcache__arena_array(a, u->n_modules, sizeof *modules);
  out->modules = pcache__arena_array(a, u->n_modules, sizeof *out->modules);
  if (!modules || !out->modules)
    return -ENOMEM;
  for (size_t m = 0; m < u->n_modules; m++) {
    pcache__module *mod = u->modules[m];
    Pcachepb__Module *pm = &modules[out->n_modules];
    if (!u->force_code && module_sent(d, &mod->hash))
      continue;
    pcachepb__module__init(pm);
    pm->hash.data = mod->hash.bytes;
    pm->hash.len = PCACHE_HASH_SIZE;
    pm->code.data = mod->code;
    pm->code.len = mod->size;
    out->modules[out->n_modules++] = pm;
  }
  return 0;
}

/* Sends one batch. Returns 0 when the daemon answered (per-item results
 * applied), PCACHE_EFRAME_TOO_LARGE when the batch is larger than any
 * request the daemon takes (nothing was sent), another <0 when it should
 * be retried later. Items the daemon refused for good are dropped and
 * counted; those whose modules it lacks come back in retry, in batch
 * order. */
static int send_batch(pcache_device *d, pcache__put_item *batch, size_t n, pcache__put_queue *retry,
                      uint64_t *ret_acked) {
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  pcache__put_request put;
  pcache__reply reply = {0};
  size_t i = 0;
  int r;

  pcache__device_info_message(&d->core, &info);
  /* All staged or none: the batcher keeps a batch to one Put.stage. */
  r = pcache__put_request_build(&put, batch, n, &info, d->core.client->app_name, add_modules, d);
  if (r < 0)
    goto out;
  /* Checked here, not left to the encoder: its refusal would look like a
   * daemon away, and the batch would be tried again for ever. */
  if (protobuf_c_message_get_packed_size(&put.request.base) > frame_limit(d)) {
    r = PCACHE_EFRAME_TOO_LARGE;
    goto out;
  }

  /* The background lane and its timeout: the reply waits for a commit,
   * which a busy disk can hold far longer than the app's timeout, and
   * pcache_device_destroy cancels a call in flight rather than wait. */
  r = pcache__client_rpc(d->core.client, PCACHE__LANE_BACKGROUND, &put.request,
                         PCACHEPB__RESPONSE__BODY_PUT,
                         pcache__client_background_timeout_ms(d->core.client), &reply);
  if (r < 0) {
    /* Refused as a whole (limits, malformed): retrying would not help. A
     * Response it was not refused with (another kind, a status not ours)
     * answered something else: out of step, the connection is gone, and
     * the batch is tried again (pcache__client_rpc), OUT_OF_STEP_MAX
     * times. */
    int again = pcache__reply_out_of_step(r, &reply) && ++d->upload.out_of_step < OUT_OF_STEP_MAX;
    if (reply.response && !again) {
      d->upload.out_of_step = 0;
      dropped(d, n, DROP_REFUSED, 0, r, reply.response->message);
      r = 0;
    } else if (r == PCACHE_EFRAME_TOO_LARGE) {
      r = PCACHE_EPROTO; /* the reply's frame, not ours: the daemon's fault */
    }
    goto out_release;
  }
  d->upload.out_of_step = 0;
  for (pcache__put_item *p = batch; p && i < n; p = p->next, i++) {
    const Pcachepb__PutReply *pr = reply.response->put;
    pcache__upload *u = upload_of(p);
    int status = i < pr->n_results ? pr->results[i]->status : 0;
    if (status == 0) {
      (*ret_acked)++;
      for (size_t m = 0; m < u->n_modules; m++)
        module_mark_sent(d, &u->modules[m]->hash);
    } else if (status == PCACHE_EMISSING_MODULE && !u->force_code) {
      /* It lost the code (purged, or a new store): send it all again. */
      pcache__upload *copy = pcache__calloc(1, sizeof *copy);
      if (copy) {
        *copy = *u;
        copy->force_code = 1;
        pcache_queue_push(retry, &copy->put);
        /* The copy took the buffers and module references. */
        u->put.blob = NULL;
        u->put.desc = NULL;
        u->n_modules = 0;
      }
    } else {
      dropped(d, 1, DROP_REFUSED, 0, status, pr->results[i]->message);
    }
  }
  r = 0;
out_release:
  pcache__reply_release(&reply);
out:
  pcache__put_request_free(&put);
  return r;
}

void pcache__upload_want_snapshot(pcache_device *d) {
  int dirty;
  if (!d->upload.running)
    return;
  pthread_mutex_lock(&d->snapshot.lock);
  dirty = d->snapshot.dirty;
  pthread_mutex_unlock(&d->snapshot.lock);
  if (!dirty)
    return;
  pthread_mutex_lock(&d->upload.lock);
  d->upload.snapshot_wanted = 1;
  pthread_cond_signal(&d->upload.wake);
  pthread_mutex_unlock(&d->upload.lock);
}

static void *upload_main(void *arg) {
  pcache_device *d = arg;
  uint64_t backoff = 0, retry_at = 0;
  /* Items the next batch may take at most: halved while a batch is larger
   * than any request the daemon takes (a small --max-frame), until one
   * item alone is, which is then dropped. */
  size_t split = SIZE_MAX;
  /* Destroy must not wait out a long call (a background prefetch page has
   * ten times the timeout): pcache__upload_stop cancels it. */
  pcache__rpc_set_cancel_fd(d->upload.cancel_fd);
  pcache__client_settle(d->core.client);
  pthread_mutex_lock(&d->upload.lock);
  while (!d->upload.stop) {
    pcache__put_queue batch, retry;
    pcache__put_item *u;
    size_t n, max_items;
    uint64_t acked = 0, used_wait_ms = 0;
    int r;
    if (d->upload.segment_wanted || d->upload.prefetch_pending) {
      pcache__upload_prefetch_locked(d);
      continue;
    }
    if (d->upload.used.n && pcache__used_due_locked(d, &used_wait_ms)) {
      pcache__used_send_locked(d);
      if (!d->upload.used.n)
        d->upload.used_now = 0;
      continue;
    }
    if (pcache__refused_queued_locked(d)) {
      pcache__refused_send_locked(d);
      continue;
    }
    if (pcache_queue_empty(&d->upload.batcher.queue) && d->upload.snapshot_wanted) {
      /* After the pipelines: the daemon lists a snapshot's hashes only
       * while their entries exist. */
      d->upload.snapshot_wanted = 0;
      d->upload.snapshot_in_flight = 1;
      pthread_mutex_unlock(&d->upload.lock);
      pcache__snapshot_upload(d);
      pthread_mutex_lock(&d->upload.lock);
      d->upload.snapshot_in_flight = 0;
      pthread_cond_broadcast(&d->upload.drained);
      continue;
    }
    if (pcache_queue_empty(&d->upload.batcher.queue)) {
      if (d->upload.used.n) {
        struct timespec ts;
        pcache__timespec_in(CLOCK_MONOTONIC, used_wait_ms, &ts);
        pthread_cond_timedwait(&d->upload.wake, &d->upload.lock, &ts);
      } else {
        pthread_cond_wait(&d->upload.wake, &d->upload.lock);
      }
      continue;
    }
    if (d->upload.retry_now) {
      d->upload.retry_now = 0; /* a flush is waiting: one try at once */
    } else if (retry_at > pcache__mono_ms()) {
      struct timespec ts;
      pcache__timespec_in(CLOCK_MONOTONIC, retry_at - pcache__mono_ms(), &ts);
      pthread_cond_timedwait(&d->upload.wake, &d->upload.lock, &ts);
      continue;
    }
    pthread_mutex_unlock(&d->upload.lock);
    max_items = pcache__client_max_hashes(d->core.client);
    if (max_items > split)
      max_items = split;
    pthread_mutex_lock(&d->upload.lock);
    /* A batch off the front: at most max_items and BATCH_MAX_BYTES, all
     * staged builds or none (Put.stage is the request's), in order. */
    n = pcache__put_batcher_take(&d->upload.batcher, &batch, max_items, BATCH_MAX_BYTES);
    if (n == 0)
      continue;
    pcache_queue_init(&retry);
    d->upload.in_flight = n;
    pthread_mutex_unlock(&d->upload.lock);

    r = send_batch(d, batch.head, n, &retry, &acked);

    pthread_mutex_lock(&d->upload.lock);
    d->upload.in_flight = 0;
    if (r == PCACHE_EFRAME_TOO_LARGE && n > 1) {
      /* Smaller batches, at once: the daemon is not away. */
      split = n / 2;
      pcache__put_batcher_requeue(&d->upload.batcher, &batch);
      continue;
    }
    if (r == PCACHE_EFRAME_TOO_LARGE) {
      /* This one item can never go: the rest of the queue must. */
      pthread_mutex_unlock(&d->upload.lock);
      dropped(d, 1, DROP_TOO_LARGE, pcache__put_item_put_bytes(batch.head), 0, NULL);
      free_item(pcache_queue_pop(&batch));
      pthread_mutex_lock(&d->upload.lock);
      pthread_cond_broadcast(&d->upload.drained);
      continue;
    }
    split = SIZE_MAX;
    if (r < 0) {
      /* Daemon away or slow: the batch goes back in front, in order. */
      pcache__put_batcher_requeue(&d->upload.batcher, &batch);
      d->upload.failures++;
      backoff = backoff ? backoff * 2 : BACKOFF_MIN_MS;
      if (backoff > BACKOFF_MAX_MS)
        backoff = BACKOFF_MAX_MS;
      retry_at = pcache__mono_ms() + backoff;
      pthread_cond_broadcast(&d->upload.drained);
      continue;
    }
    backoff = retry_at = 0;
    atomic_fetch_add(&d->core.stats.uploaded, acked);
    /* In front too, in their batch order: they were next in line. */
    pcache__put_batcher_requeue(&d->upload.batcher, &retry);
    pthread_mutex_unlock(&d->upload.lock);
    while ((u = pcache_queue_pop(&batch)) != NULL)
      free_item(u);
    pthread_mutex_lock(&d->upload.lock);
    pthread_cond_broadcast(&d->upload.drained);
  }
  pthread_mutex_unlock(&d->upload.lock);
  return NULL;
}

int pcache__upload_start(pcache_device *d) {
  pthread_condattr_t attr;
  int r = -ENOMEM;
  /* In order, never passing an item of another Put: a staged build keeps
   * its place in line. */
  pcache__put_batcher_init(&d->upload.batcher, QUEUE_MAX, QUEUE_MAX_BYTES, 0);
  d->upload.cancel_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (d->upload.cancel_fd < 0)
    return -errno;
  if (pthread_mutex_init(&d->upload.lock, NULL) != 0)
    goto out_cancel_fd;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  if (pthread_cond_init(&d->upload.wake, &attr) != 0)
    goto out_mutex;
  if (pthread_cond_init(&d->upload.drained, &attr) != 0)
    goto out_cond;
  {
    /* The app's signals are the app's: this thread takes none of them (a
     * handler run here could wait on this thread's own drain: the layer's
     * report at SIGTERM, layer/signals.c). */
    sigset_t all, old;
    int created;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    created = pthread_create(&d->upload.thread, NULL, upload_main, d) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!created)
      goto out_flush_cond;
  }
  pthread_condattr_destroy(&attr);
  d->upload.running = 1;
  return 0;
out_flush_cond:
  pthread_cond_destroy(&d->upload.drained);
out_cond:
  pthread_cond_destroy(&d->upload.wake);
out_mutex:
  pthread_condattr_destroy(&attr);
  pthread_mutex_destroy(&d->upload.lock);
out_cancel_fd:
  close(d->upload.cancel_fd);
  d->upload.cancel_fd = -1;
  return r;
}

void pcache__upload_enqueue(pcache_device *d, pcache__upload *item) {
  pcache__put_item *left;
  uint64_t put_bytes;
  for (size_t m = 0; m < item->n_modules; m++)
    item->put.modules_bytes += item->modules[m]->size + PCACHE_PUT_ITEM_OVERHEAD;
  put_bytes = pcache__put_item_put_bytes(&item->put);
  /* Never sendable as it is: dropped now rather than held in the queue.
   * (A limit the daemon raises later is for the next process.) */
  if (put_bytes + PCACHE_PUT_OVERHEAD > frame_limit(d)) {
    dropped(d, 1, DROP_TOO_LARGE, put_bytes, 0, NULL);
    pcache__upload_free(item);
    return;
  }
  pthread_mutex_lock(&d->upload.lock);
  /* Bounded while the daemon is away: in items, the oldest go first; in
   * bytes, the one that would pass the bound (it may be the largest). */
  left = pcache__put_batcher_push(&d->upload.batcher, &item->put);
  if (left != &item->put)
    pthread_cond_signal(&d->upload.wake);
  pthread_mutex_unlock(&d->upload.lock);
  if (left) {
    dropped(d, 1, DROP_QUEUE_FULL, 0, 0, NULL);
    free_item(left);
  }
}

static int upload_pending(const pcache_device *d) {
  return d->upload.batcher.len || d->upload.in_flight || d->upload.snapshot_wanted ||
         d->upload.snapshot_in_flight || d->upload.used.n || d->upload.used_in_flight ||
         pcache__refused_pending_locked(d);
}

int pcache__upload_flush(pcache_device *d, uint32_t timeout_ms) {
  struct timespec ts;
  int r = 0;
  pcache__timespec_in(CLOCK_MONOTONIC, timeout_ms, &ts);
  pthread_mutex_lock(&d->upload.lock);
  d->upload.retry_now = 1;
  d->upload.used_now = 1;
  pthread_cond_signal(&d->upload.wake);
  while (upload_pending(d) && r != ETIMEDOUT)
    r = pthread_cond_timedwait(&d->upload.drained, &d->upload.lock, &ts);
  r = upload_pending(d) ? -ETIMEDOUT : 0;
  if (!d->upload.used.n)
    d->upload.used_now = 0; /* uses queued after this wait for their Report */
  pthread_mutex_unlock(&d->upload.lock);
  return r;
}

int pcache__upload_drain(pcache_device *d, uint32_t budget_ms, int at_exit) {
  struct timespec ts;
  uint64_t failures;
  int r = 0;
  if (!d->upload.running)
    return 0;
  pcache__timespec_in(CLOCK_MONOTONIC, budget_ms, &ts);
  pthread_mutex_lock(&d->upload.lock);
  if (at_exit) {
    /* The rest of a prefetch and a snapshot would call the driver, which
     * may already be unloaded at exit; the queued uploads carry copies. */
    d->upload.prefetch_pending = 0;
    d->upload.snapshot_wanted = 0;
  }
  failures = d->upload.failures;
  d->upload.retry_now = 1;
  d->upload.used_now = 1;
  pthread_cond_signal(&d->upload.wake);
  while (upload_pending(d) && d->upload.failures == failures && r != ETIMEDOUT)
    r = pthread_cond_timedwait(&d->upload.drained, &d->upload.lock, &ts);
  r = !upload_pending(d) ? 0 : d->upload.failures != failures ? PCACHE_EUNAVAILABLE : -ETIMEDOUT;
  pthread_mutex_unlock(&d->upload.lock);
  return r;
}

void pcache__upload_stop(pcache_device *d) {
  pcache__put_item *u;
  if (!d->upload.running)
    return;
  pthread_mutex_lock(&d->upload.lock);
  d->upload.stop = 1;
  pthread_cond_broadcast(&d->upload.wake);
  pthread_mutex_unlock(&d->upload.lock);
  /* The flush before this already had the client's whole timeout: end
   * whatever call the thread still has in flight rather than wait for it. */
  (void)!write(d->upload.cancel_fd, &(uint64_t){1}, sizeof(uint64_t));
  pthread_join(d->upload.thread, NULL);
  d->upload.running = 0;
  close(d->upload.cancel_fd);
  d->upload.cancel_fd = -1;
  while ((u = pcache__put_batcher_pop(&d->upload.batcher)) != NULL)
    free_item(u);
  pcache_vec_free(&d->upload.sent_modules);
  pcache_vec_free(&d->upload.used);
  pcache_vec_free(&d->upload.refused);
  pthread_cond_destroy(&d->upload.drained);
  pthread_cond_destroy(&d->upload.wake);
  pthread_mutex_destroy(&d->upload.lock);
}

uint64_t pcache__upload_queue_len(pcache_device *d) {
  uint64_t n;
  pthread_mutex_lock(&d->upload.lock);
  n = d->upload.batcher.len + d->upload.in_flight;
  pthread_mutex_unlock(&d->upload.lock);
  return n;
}
