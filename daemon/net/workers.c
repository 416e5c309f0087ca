#include "workers.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/log.h"
#include "conn_registry.h"
#include "connection.h"
#include "server.h"

#define SWEEP_MS 500

/* An accepted connection on its way from the accepting loop (fd >= 0),
 * or a connection of this worker to close for a newcomer (fd -1: the one
 * whose id is reap_id). */
struct pcd_handoff {
  pcd_handoff *next;
  int fd;
  uint32_t pid;
  uint64_t reap_id;
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

/* --------------------------------------------------------------- admission */

/* A connection is idle, and may be closed for a newcomer, once it has
 * been quiet this long: a client between two requests of one burst is
 * not. By the monotonic clock, as every timeout. */
#define IDLE_GRACE_US 1000000u

/* Whether c's peer has hung up and its I/O thread has not seen it yet: a
 * program that closes and reconnects at once must not find its closed
 * connections still counted against it. poll only looks; the fd stays
 * its worker's. */
static int hung_up(const pcd_conn *c) {
  struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR));
}

/* The idle connection (of pid, or of anyone when all) that went quiet
 * first and is not already going, or NULL; one whose peer hung up counts
 * as idle at once. Under the registry's lock. */
static pcd_conn *oldest_idle(pcd_conn_registry *r, uint32_t pid, int all, uint64_t now_us) {
  pcd_conn *best = NULL;
  uint64_t best_since = 0;
  for (pcd_conn *c = r->head; c; c = c->reg_next) {
    uint64_t since = atomic_load_explicit(&c->quiet_since_us, memory_order_relaxed);
    if (c->reg_reaping || (!all && c->pid != pid))
      continue;
    if (hung_up(c))
      return c;
    if (!since || now_us - since < IDLE_GRACE_US)
      continue;
    if (!best || since < best_since) {
      best = c;
      best_since = since;
    }
  }
  return best;
}

/* Who holds c, for fair shares: the process that made it, or 0 when that
 * process is gone (its descriptor was passed on or inherited: all such
 * connections count as one holder's). */
static uint32_t holder_of(const pcd_conn *c) {
  return c->pid && (kill((pid_t)c->pid, 0) == 0 || errno != ESRCH) ? c->pid : 0;
}

/* At the limit with nothing idle: the oldest connection of whoever holds
 * the most, when that is more than the newcomer's process holds plus one.
 * Connections kept busy on purpose (a request every half second, or
 * descriptors gathered from processes that then exited) never go idle; a
 * holder of many then loses its oldest rather than lock out a process
 * with fewer. A same-user process can still deny service in other ways
 * (docs/RELIABILITY.md). NULL when no one holds more. Under the registry's
 * lock. */
static pcd_conn *fair_share_victim(pcd_conn_registry *r, uint64_t mine) {
  size_t n = 0, i = 0, best = 0;
  uint64_t best_count = 0;
  uint32_t *holders;
  pcd_conn *victim = NULL;
  for (pcd_conn *c = r->head; c; c = c->reg_next)
    n++;
  holders = pcache__calloc(n ? n : 1, sizeof *holders);
  if (!holders)
    return NULL;
  for (pcd_conn *c = r->head; c; c = c->reg_next)
    holders[i++] = c->reg_reaping ? UINT32_MAX : holder_of(c);
  /* The registry runs oldest first: the first of the biggest holder's. */
  for (i = 0; i < n; i++) {
    uint64_t count = 0;
    if (holders[i] == UINT32_MAX)
      continue;
    for (size_t k = 0; k < n; k++)
      count += holders[k] == holders[i];
    if (count > best_count) {
      best_count = count;
      best = i;
    }
  }
  if (best_count > mine + 1) {
    victim = r->head;
    for (i = 0; i < best; i++)
      victim = victim->reg_next;
  }
  pcache__free(holders);
  return victim;
}

/* Has c's worker close it. Under the registry's lock: c is alive until its worker
 * removes it, which takes the lock; the worker finds it again by id. */
static int reap(pcd_conn_registry *r, pcd_conn *c, uint64_t now_us, const char *why) {
  pcd_handoff *h = pcache__calloc(1, sizeof *h);
  uint64_t since = atomic_load(&c->quiet_since_us);
  if (!h)
    return -ENOMEM;
  if (hung_up(c))
    log_info("dropping a connection of pid %u that its peer already closed, to admit a new one "
             "(%s)",
             c->pid, why);
  else if (since && now_us - since >= IDLE_GRACE_US)
    log_info("closing an idle connection of pid %u (quiet for %llu s) to admit a new one (%s)",
             c->pid, (unsigned long long)(now_us - since) / 1000000u, why);
  else
    log_info("closing the oldest connection of pid %u, which holds the most of them, to admit "
             "a process that holds fewer (%s, none idle)",
             c->pid, why);
  c->reg_reaping = 1;
  r->n_reaping++;
  h->fd = -1;
  h->reap_id = c->id;
  pthread_mutex_lock(&c->worker->lock);
  pcache_queue_push(&c->worker->incoming, h);
  pthread_mutex_unlock(&c->worker->lock);
  uv_async_send(&c->worker->wake);
  return 0;
}

int pcd_workers_admit(pcd_server *srv, uint32_t pid, uint64_t open, int *ret_per_process) {
  const pcd_config *cfg = srv->config;
  pcd_conn_registry *reg = &srv->conns;
  uint64_t now = pcache__mono_us(), mine = 0;
  pcd_conn *victim;
  int r = 0;
  *ret_per_process = 0;
  pthread_mutex_lock(&reg->lock);
  for (pcd_conn *c = reg->head; c; c = c->reg_next)
    mine += c->pid == pid && !c->reg_reaping;
  /* Connections picked before count as gone: they are. */
  open = open > reg->n_reaping ? open - reg->n_reaping : 0;
  if (mine >= cfg->max_conn_per_process) {
    victim = oldest_idle(reg, pid, 0, now);
    if (!victim || reap(reg, victim, now, "--max-connections-per-process") < 0) {
      *ret_per_process = 1;
      r = PCACHE_ETOO_MANY_CONNECTIONS;
      goto out;
    }
    open--;
  }
  if (open >= cfg->max_connections) {
    victim = oldest_idle(reg, 0, 1, now);
    if (!victim)
      victim = fair_share_victim(reg, mine);
    if (!victim || reap(reg, victim, now, "--max-connections") < 0)
      r = PCACHE_ETOO_MANY_CONNECTIONS;
  }
out:
  pthread_mutex_unlock(&reg->lock);
  return r;
}

/* The reap handoff: closes this worker's connection id, if still open. */
static void reap_conn(pcd_worker *w, uint64_t id) {
  for (pcd_conn *c = w->conns; c; c = c->next)
    if (c->id == id) {
      pcd_conn_close(c);
      return;
    }
}

/* ------------------------------------------------------------- connections */

static void add_conn(pcd_worker *w, pcd_conn *conn) {
  conn->next = w->conns;
  if (w->conns)
    w->conns->prev = conn;
  w->conns = conn;
  w->n_conns++;
  pcd_conn_registry_add(&w->srv->conns, conn);
}

static void conn_closed(pcd_worker *w, pcd_conn *conn) {
  pcd_conn_registry_remove(&w->srv->conns, conn);
  if (conn->prev)
    conn->prev->next = conn->next;
  else
    w->conns = conn->next;
  if (conn->next)
    conn->next->prev = conn->prev;
  conn->prev = conn->next = NULL;
  w->n_conns--;
  pcd_conn_registry_count_out(&w->srv->conns);
  log_debug("client pid %u gone (%llu open)", conn->pid,
            (unsigned long long)atomic_load(&w->srv->conns.n_open));
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

int pcd_worker_open_conn(pcd_worker *w, int fd, uint32_t pid, pcd_conn **ret_conn) {
  int r = pcd_conn_open(w, &owner, fd, ret_conn);
  if (r == 0) {
    (*ret_conn)->pid = pid; /* before the registry sees it */
    add_conn(w, *ret_conn);
  }
  return r;
}

static void take_fd(pcd_worker *w, int fd, uint32_t pid) {
  pcd_conn *c;
  if (w->stopping || pcd_worker_open_conn(w, fd, pid, &c) < 0) {
    close(fd);
    pcd_conn_registry_count_out(&w->srv->conns);
  }
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
    if (handoff->fd >= 0)
      take_fd(w, handoff->fd, handoff->pid);
    else
      reap_conn(w, handoff->reap_id);
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
    pcd_conn_registry_count_out(&w->srv->conns);
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
    if (h->fd >= 0) {
      close(h->fd);
      pcd_conn_registry_count_out(&w->srv->conns);
    }
    pcache__free(h);
  }
  pcd_touch_set_free(&w->touches);
  pcd_scratch_free(&w->scratch);
  pthread_mutex_destroy(&w->lock);
}
