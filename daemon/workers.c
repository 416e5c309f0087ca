#include "workers.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "connection.h"
#include "server.h"

#define SWEEP_MS 500

/* An accepted connection on its way from the accepting loop. */
struct pcd_handoff {
  pcd_handoff *next;
  int fd;
  uint32_t pid;
};

/* ----------------------------------------------------------------- touches */

void pcd_worker_touch(pcd_worker *w, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t now_us) {
  /* A lost hit (no memory) only ages an entry a little sooner. */
  (void)pcd_touch_set_add(&w->touches, key, now_us);
  /* Distinct entries are bounded too: a full set goes to the writer now
   * rather than at the next flush interval. */
  if (w->touches.n >= PCD_TOUCH_SET_MAX)
    pcd_worker_flush_touches(w);
}

void pcd_worker_flush_touches(pcd_worker *w) {
  pcd_job *job;
  w->last_flush_us = pcache__mono_us();
  if (!w->touches.n || !w->srv->writer)
    return;
  job = pcd_job_new(PCD_JOB_TOUCH);
  if (!job)
    return;
  pcd_touch_set_take(&w->touches, &job->touches, &job->n_touches);
  pcd_writer_submit(w->srv->writer, job);
}

/* ------------------------------------------------------------- connections */

static void add_conn(pcd_worker *w, pcd_conn *conn) {
  conn->next = w->conns;
  if (w->conns)
    w->conns->prev = conn;
  w->conns = conn;
  w->n_conns++;
}

static void conn_closed(pcd_worker *w, pcd_conn *conn) {
  if (conn->prev)
    conn->prev->next = conn->next;
  else
    w->conns = conn->next;
  if (conn->next)
    conn->next->prev = conn->prev;
  conn->prev = conn->next = NULL;
  w->n_conns--;
  pcd_server_conn_closed(w->srv);
  log_debug("client pid %u gone (%llu open)", conn->pid,
            (unsigned long long)atomic_load(&w->srv->n_conns));
}

static void conn_park(pcd_worker *w);
static void conn_unpark(pcd_worker *w);
static void conn_served(pcd_worker *w);

/* How this worker's connections reach it (connection.h). */
static const pcd_conn_owner owner = {
    .closed = conn_closed,
    .park = conn_park,
    .unpark = conn_unpark,
    .served = conn_served,
};

int pcd_worker_open_conn(pcd_worker *w, int fd, pcd_conn **ret_conn) {
  int r = pcd_conn_open(w, &owner, fd, ret_conn);
  if (r == 0)
    add_conn(w, *ret_conn);
  return r;
}

static void take_fd(pcd_worker *w, int fd, uint32_t pid) {
  pcd_conn *c;
  if (w->stopping || pcd_worker_open_conn(w, fd, &c) < 0) {
    close(fd);
    pcd_server_conn_closed(w->srv);
    return;
  }
  c->pid = pid;
}

/* ------------------------------------------------------------------ parked */

/* A parked client asked again before taking its reply memfd; one that
 * pipelines a request or two and then reads should not wait long for it.
 * So a connection just parked is rechecked every millisecond for
 * PCD_BULK_FAST_CHECKS checks, then every PCD_BULK_RECHECK_MS (a client
 * that really does not read costs one ioctl per 20 ms, not one per
 * millisecond). No poll event says when the client reads: its socket
 * polls writable all along, since a queued memfd message takes a few
 * hundred bytes of the send buffer whatever the file's size. */
#define PCD_BULK_FAST_CHECKS 10

static void on_bulk_timer(uv_timer_t *t) {
  pcd_worker *w = t->data;
  for (pcd_conn *c = w->conns, *next; c; c = next) {
    next = c->next;
    if (c->bulk_parked)
      pcd_conn_bulk_recheck(c);
  }
  if (w->n_parked && ++w->bulk_checks == PCD_BULK_FAST_CHECKS)
    uv_timer_set_repeat(&w->bulk_timer, PCD_BULK_RECHECK_MS);
}

static void conn_park(pcd_worker *w) {
  w->n_parked++;
  if (w->stopping)
    return;
  /* A newly parked connection starts the fast checks again. */
  w->bulk_checks = 0;
  uv_timer_start(&w->bulk_timer, on_bulk_timer, 1, 1);
}

static void conn_unpark(pcd_worker *w) {
  if (--w->n_parked == 0)
    uv_timer_stop(&w->bulk_timer);
}

/* ------------------------------------------------------------- busy poll */

/* A client that has just been answered usually asks again at once (a
 * miss after a miss, a Get per pipeline at start-up). Waking a thread
 * that slept in epoll costs tens of microseconds, more than serving a
 * Get; so after a request the loop keeps polling with a zero timeout (an
 * active idle handle makes libuv do that) for --busy-poll-us, and sleeps
 * once nothing came for that long. Idle, the daemon spins never. */
static void on_spin(uv_idle_t *h) {
  pcd_worker *w = h->data;
  if (pcache__mono_us() >= w->spin_until_us)
    uv_idle_stop(h);
}

static void conn_served(pcd_worker *w) {
  uint64_t us = w->srv->config->busy_poll_us;
  if (!us || w->stopping)
    return;
  w->spin_until_us = pcache__mono_us() + us;
  if (!uv_is_active((uv_handle_t *)&w->spin))
    uv_idle_start(&w->spin, on_spin);
}

/* ------------------------------------------------------------------ wakeup */

static void on_sweep(uv_timer_t *t) {
  pcd_worker *w = t->data;
  uint64_t now = pcache__mono_us();
  for (pcd_conn *c = w->conns, *next; c; c = next) {
    next = c->next;
    pcd_conn_check_timeout(c, now);
  }
  if (now - w->last_flush_us >= w->srv->config->flush_interval_ms * 1000)
    pcd_worker_flush_touches(w);
}

/* No new requests: hits go to the writer, idle connections close, busy
 * ones close once their write job is answered (pcd_conn_resume). */
static void begin_stop(pcd_worker *w) {
  w->stopping = 1;
  pcd_worker_flush_touches(w);
  for (pcd_conn *c = w->conns, *next; c; c = next) {
    next = c->next;
    if (!c->busy)
      pcd_conn_close(c);
  }
}

/* Once nothing is open or at the writer, closing the last handles ends
 * the loop. */
static void maybe_finish(pcd_worker *w) {
  if (!w->stopping || w->conns || w->inflight || uv_is_closing((uv_handle_t *)&w->wake))
    return;
  uv_close((uv_handle_t *)&w->wake, NULL);
  uv_close((uv_handle_t *)&w->sweep_timer, NULL);
  uv_close((uv_handle_t *)&w->bulk_timer, NULL);
  uv_close((uv_handle_t *)&w->spin, NULL);
}

static void on_wake(uv_async_t *h) {
  pcd_worker *w = h->data;
  PCACHE_QUEUE(pcd_handoff) in;
  PCACHE_QUEUE(pcd_job) done;
  pcd_handoff *handoff;
  pcd_job *job;
  int stop;
  pthread_mutex_lock(&w->lock);
  pcache_queue_take_all(&in, &w->incoming);
  pcache_queue_take_all(&done, &w->done);
  stop = w->stop_requested;
  pthread_mutex_unlock(&w->lock);

  while ((handoff = pcache_queue_pop(&in)) != NULL) {
    take_fd(w, handoff->fd, handoff->pid);
    pcache__free(handoff);
  }
  while ((job = pcache_queue_pop(&done)) != NULL) {
    w->inflight--;
    job->finish(job);
  }
  if (stop && !w->stopping)
    begin_stop(w);
  maybe_finish(w);
}

/* -------------------------------------------------------------- lifecycle */

int pcd_worker_init(pcd_worker *w, pcd_server *srv, uv_loop_t *loop) {
  int r;
  memset(w, 0, sizeof *w);
  w->srv = srv;
  pcache_queue_init(&w->incoming);
  pcache_queue_init(&w->done);
  w->last_flush_us = pcache__mono_us();
  if (!loop) {
    if ((r = pcd_uv_err(uv_loop_init(&w->own_loop))) < 0)
      return r;
    loop = &w->own_loop;
  }
  w->loop = loop;
  if ((r = pcd_uv_err(uv_async_init(loop, &w->wake, on_wake))) < 0) {
    if (loop == &w->own_loop)
      uv_loop_close(loop);
    return r;
  }
  w->wake.data = w;
  uv_timer_init(loop, &w->sweep_timer);
  w->sweep_timer.data = w;
  uv_timer_init(loop, &w->bulk_timer);
  w->bulk_timer.data = w;
  uv_idle_init(loop, &w->spin);
  w->spin.data = w;
  pthread_mutex_init(&w->lock, NULL);
  return 0;
}

static void *worker_main(void *arg) {
  pcd_worker *w = arg;
  uv_run(w->loop, UV_RUN_DEFAULT);
  return NULL;
}

int pcd_worker_start(pcd_worker *w) {
  int r;
  uv_timer_start(&w->sweep_timer, on_sweep, SWEEP_MS, SWEEP_MS);
  r = -pthread_create(&w->thread, NULL, worker_main, w);
  if (r < 0) {
    uv_close((uv_handle_t *)&w->wake, NULL);
    uv_close((uv_handle_t *)&w->sweep_timer, NULL);
    uv_close((uv_handle_t *)&w->bulk_timer, NULL);
    uv_close((uv_handle_t *)&w->spin, NULL);
    uv_run(w->loop, UV_RUN_DEFAULT);
    uv_loop_close(w->loop);
    pthread_mutex_destroy(&w->lock);
    return r;
  }
  w->has_thread = 1;
  return 0;
}

void pcd_worker_hand(pcd_worker *w, int fd, uint32_t pid) {
  pcd_handoff *h = pcache__calloc(1, sizeof *h);
  if (!h) {
    close(fd);
    pcd_server_conn_closed(w->srv);
    return;
  }
  h->fd = fd;
  h->pid = pid;
  pthread_mutex_lock(&w->lock);
  pcache_queue_push(&w->incoming, h);
  pthread_mutex_unlock(&w->lock);
  uv_async_send(&w->wake);
}

void pcd_worker_post(pcd_worker *w, pcd_job *job) {
  pthread_mutex_lock(&w->lock);
  pcache_queue_push(&w->done, job);
  pthread_mutex_unlock(&w->lock);
  uv_async_send(&w->wake);
}

void pcd_worker_request_stop(pcd_worker *w) {
  pthread_mutex_lock(&w->lock);
  w->stop_requested = 1;
  pthread_mutex_unlock(&w->lock);
  uv_async_send(&w->wake);
}

void pcd_worker_join(pcd_worker *w) {
  pcd_handoff *h;
  if (w->has_thread) {
    pthread_join(w->thread, NULL);
    w->has_thread = 0;
  }
  if (w->loop == &w->own_loop)
    uv_loop_close(w->loop);
  /* Handed over after the loop ended (never, once accepting stopped). */
  while ((h = pcache_queue_pop(&w->incoming)) != NULL) {
    close(h->fd);
    pcd_server_conn_closed(w->srv);
    pcache__free(h);
  }
  pcd_touch_set_free(&w->touches);
  pcd_scratch_free(&w->scratch);
  pthread_mutex_destroy(&w->lock);
}
