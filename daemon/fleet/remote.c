/* The fleet tier's life on the accepting loop, and its doors for other
 * threads: I/O threads hand it asks, the writer hands it values to push,
 * both under its lock with a uv_async wake-up (the workers' pattern,
 * docs/architecture.md "Queues"). A sweep timer runs while anything is
 * under way: it answers asks at their deadline, and drops a connection
 * that has left a command unanswered, or not finished connecting, for
 * pcd_remote_stall_us (a stopped or wedged Redis), so that later misses
 * skip the remote at once instead of each waiting out its deadline. */
#include "remote_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"

/* ------------------------------------------------------------------ sweep */

static void on_sweep(uv_timer_t *t) {
  pcd_remote *r = t->data;
  uint64_t now = pcache__mono_us(), stall = pcd_remote_stall_us(r);
  int state = atomic_load(&r->state);
  if (state == PCD_REMOTE_CONNECTING && now - r->state_since_us > stall) {
    pcd_remote_drop(r, "no answer to the handshake (stalled?)");
  } else if (state == PCD_REMOTE_UP && r->commands && now - r->last_progress_us > stall) {
    char why[96];
    snprintf(why, sizeof why, "no reply for %llu ms (stalled?)",
             (unsigned long long)(now - r->last_progress_us) / 1000);
    pcd_remote_drop(r, why);
  }
  pcd_remote_fetch_expire(r, now);
  if (!r->pending && !r->commands && atomic_load(&r->state) != PCD_REMOTE_CONNECTING) {
    uv_timer_stop(&r->sweep_timer);
    r->sweeping = 0;
  }
}

/* Sweeps a few times per --remote-timeout while something is under way. */
static void sweep_soon(pcd_remote *r) {
  uint64_t every = r->config->remote_timeout_ms / 4;
  if (r->sweeping || atomic_load(&r->state) == PCD_REMOTE_STOPPED)
    return;
  r->sweeping = 1;
  every = every < 2 ? 2 : every > 50 ? 50 : every;
  uv_timer_start(&r->sweep_timer, on_sweep, every, every);
}

/* remote_conn.c, once PING is answered: what waited for it (the pushes,
 * a sync the probe wanted). */
static void on_up(pcd_remote *r) {
  pcd_remote_push_flush(r);
  pcd_remote_sync_run(r);
}

static void on_wake(uv_async_t *h) {
  pcd_remote *r = h->data;
  PCACHE_QUEUE(pcd_ask) asks;
  pcd_ask *ask;
  pthread_mutex_lock(&r->lock);
  pcache_queue_take_all(&asks, &r->asks);
  pthread_mutex_unlock(&r->lock);
  while ((ask = pcache_queue_pop(&asks)) != NULL)
    pcd_remote_fetch_start(r, ask);
  pcd_remote_sync_run(r);
  pcd_remote_push_flush(r);
  if (r->pending || r->commands || atomic_load(&r->state) == PCD_REMOTE_CONNECTING)
    sweep_soon(r);
}

/* ------------------------------------------------------------ other threads */

int pcd_remote_ready(pcd_remote *r) { return r && atomic_load(&r->state) == PCD_REMOTE_UP; }

int pcd_remote_publishes(const pcd_remote *r) { return r && r->trust.signs; }

int pcd_remote_trusts_any(const pcd_remote *r) { return r && r->trust.n_keys > 0; }

/* Queues ask for the loop, or answers it at once once stopped. */
static void submit(pcd_remote *r, pcd_ask *ask, uint64_t timeout_ms) {
  int stopped;
  ask->remote = r;
  ask->deadline_us = pcache__mono_us() + timeout_ms * 1000u;
  pthread_mutex_lock(&r->lock);
  stopped = r->stopped;
  if (!stopped)
    pcache_queue_push(&r->asks, ask);
  pthread_mutex_unlock(&r->lock);
  if (!stopped) {
    uv_async_send(&r->wake);
    return;
  }
  r->done(ask->job);
  pcd_remote_ask_free(ask);
}

void pcd_remote_ask_get(pcd_remote *r, pcd_job *job, const uint8_t *device_key,
                        const uint8_t *hashes, size_t n_hashes) {
  pcd_ask *ask = pcache__calloc(1, sizeof *ask);
  if (ask && n_hashes && !(ask->hashes = pcache__malloc(n_hashes * PCACHE_HASH_SIZE))) {
    pcache__free(ask);
    ask = NULL;
  }
  if (!ask) {
    r->done(job);
    return;
  }
  ask->job = job;
  memcpy(ask->device_key, device_key, PCACHE_DEVKEY_SIZE);
  snprintf(ask->app, sizeof ask->app, "%s", job->app);
  memcpy(ask->hashes, hashes, n_hashes * PCACHE_HASH_SIZE);
  ask->n_hashes = n_hashes;
  submit(r, ask, r->config->remote_timeout_ms);
}

/* A Prefetch's first page: the client waits ten times its Get timeout
 * for it (client/upload.c), and so may the fleet's part. */
#define PREFETCH_TIMEOUT_FACTOR 10u

void pcd_remote_ask_prefetch(pcd_remote *r, pcd_job *job, const uint8_t *device_key,
                             const char *app, int snapshot) {
  pcd_ask *ask = pcache__calloc(1, sizeof *ask);
  if (!ask) {
    r->done(job);
    return;
  }
  ask->job = job;
  ask->prefetch = 1;
  ask->want_snapshot = snapshot;
  memcpy(ask->device_key, device_key, PCACHE_DEVKEY_SIZE);
  snprintf(ask->app, sizeof ask->app, "%s", app);
  submit(r, ask, r->config->remote_timeout_ms * PREFETCH_TIMEOUT_FACTOR);
}

void pcd_remote_push(pcd_remote *r, pcd_push *list) {
  uint64_t dropped = 0;
  int any = 0;
  pthread_mutex_lock(&r->lock);
  while (list) {
    pcd_push *p = list;
    list = p->next;
    p->next = NULL;
    if (r->stopped || !r->trust.signs || r->queued_bytes + p->size > r->config->remote_queue) {
      pcd_push_free_all(p);
      dropped++;
      continue;
    }
    pcache_queue_push(&r->pushes, p);
    r->queued++;
    r->queued_bytes += p->size;
    any = 1;
  }
  pthread_mutex_unlock(&r->lock);
  if (dropped)
    atomic_fetch_add(&r->stats->fleet_push_dropped, dropped);
  if (any)
    uv_async_send(&r->wake);
}

/* The last fleet sync (remote_sync.c), or that one runs. */
static void sync_stats(pcd_remote *r, Pcachepb__RemoteStats *s, pcache__arena *arena) {
  const pcd_sync *y = &r->sync;
  Pcachepb__FleetSyncReply *c = pcache__arena_alloc(arena, sizeof *c);
  pthread_mutex_lock(&r->lock);
  s->sync_state = (char *)(y->running ? "running" : !y->ever ? "" : y->failed ? "failed" : "done");
  if (y->ever && !y->running)
    s->sync_age_ms = (pcache__mono_us() - y->ended_us) / 1000u;
  s->sync_error = pcache__arena_strdup(arena, y->error);
  if (c && y->ever) {
    pcd_sync_counts_fill(c, &y->last, y->last_ms);
    s->sync = c;
  }
  pthread_mutex_unlock(&r->lock);
}

Pcachepb__RemoteStats *pcd_remote_stats(pcd_remote *r, pcache__arena *arena) {
  static const char *const names[] = {"down", "connecting", "up", "stopped"};
  Pcachepb__RemoteStats *s = pcache__arena_alloc(arena, sizeof *s);
  const pcd_stats *st = r->stats;
  if (!s)
    return NULL;
  pcachepb__remote_stats__init(s);
  s->url = pcache__arena_strdup(arena, pcd_remote_url(r));
  s->state = (char *)names[atomic_load(&r->state)];
  pthread_mutex_lock(&r->lock);
  s->last_error = pcache__arena_strdup(arena, r->last_error);
  s->queued = r->queued;
  s->queued_bytes = r->queued_bytes;
  pthread_mutex_unlock(&r->lock);
  s->reconnects = atomic_load(&st->fleet_reconnects);
  s->asks = atomic_load(&st->fleet_asks);
  s->fetched = atomic_load(&st->fleet_fetched);
  s->stored = atomic_load(&st->fleet_stored);
  s->refused = atomic_load(&st->fleet_refused);
  s->refused_unsigned = atomic_load(&st->fleet_refused_unsigned);
  s->refused_untrusted = atomic_load(&st->fleet_refused_untrusted);
  s->refused_signature = atomic_load(&st->fleet_refused_signature);
  if (r->trust.signs) {
    char id[2 * PCD_FLEET_KEY_ID_SIZE + 1];
    pcd_trust_key_id(r->trust.public_key, id);
    s->signing_key = pcache__arena_strdup(arena, id);
  }
  s->trusted_keys = (uint32_t)r->trust.n_keys;
  s->timeouts = atomic_load(&st->fleet_timeouts);
  s->pushed = atomic_load(&st->fleet_pushed);
  s->push_dropped = atomic_load(&st->fleet_push_dropped);
  s->push_errors = atomic_load(&st->fleet_push_errors);
  s->skipped = atomic_load(&st->fleet_skipped);
  sync_stats(r, s, arena);
  return s;
}

/* ------------------------------------------------------------------- life */

/* Who this daemon is to the fleet, once at start; what is missing, with
 * the fix. */
static void say_trust(const pcd_remote *r) {
  const pcd_trust *t = &r->trust;
  char id[2 * PCD_FLEET_KEY_ID_SIZE + 1], list[8 * 18 + 8] = "";
  size_t at = 0;
  for (size_t i = 0; i < t->n_keys && i < 8; i++) {
    pcd_trust_key_id(t->keys[i], id);
    at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", i ? " " : "", id);
  }
  if (t->n_keys > 8)
    snprintf(list + at, sizeof list - at, " ...");
  if (t->signs) {
    pcd_trust_key_id(t->public_key, id);
    log_info("remote: publishes what this machine's clients upload, signed with key %s", id);
  } else {
    log_info("remote: reads only: no --remote-signing-key, so nothing is pushed to the fleet");
  }
  if (!t->n_keys)
    log_warn("remote: no writer is trusted (no --remote-trusted-keys%s), so every fleet value "
             "would be refused and none is asked for. Pass --remote-trusted-keys FILE listing "
             "the writers' public keys, one per line (`pcachectl fleet keygen DIR` makes a "
             "pair; docs/fleet.md)",
             t->have_file ? ": the file lists none" : "");
  else if (!t->have_file)
    log_warn("remote: no --remote-trusted-keys: only values this daemon signed (key %s) are "
             "accepted, every other writer's refused. Pass --remote-trusted-keys FILE listing "
             "the writers' public keys, one per line (docs/fleet.md)",
             list);
  else
    log_info("remote: accepts fleet values signed by %zu key%s: %s", t->n_keys,
             t->n_keys == 1 ? "" : "s", list);
}

void pcd_remote_on_exe(pcd_remote *r, pcd_remote_exe_cb cb) {
  if (r)
    r->on_exe = cb;
}

int pcd_remote_new(const pcd_config *config, uv_loop_t *loop, pcd_store *store, pcd_writer *writer,
                   pcd_stats *stats, pcd_job_done_cb done, const pcd_job_hooks *put_hooks,
                   void *put_ctx, pcd_remote **ret_remote) {
  pcd_remote *r = pcache__calloc(1, sizeof *r);
  int e;
  if (!r)
    return -ENOMEM;
  r->config = config;
  r->loop = loop;
  r->store = store;
  r->writer = writer;
  r->stats = stats;
  r->done = done;
  r->put_hooks = put_hooks;
  r->put_ctx = put_ctx;
  r->on_up = on_up;
  r->backoff_ms = 100;
  atomic_init(&r->state, PCD_REMOTE_DOWN);
  pcache_queue_init(&r->asks);
  pcache_queue_init(&r->pushes);
  pcache_queue_init(&r->sync.waiters);
  pcache_queue_init(&r->sync.landed);
  pcache_queue_init(&r->sync.riding);
  pcache_queue_init(&r->sync.joining);
  if ((e = pcd_remote_parse(r)) < 0 || (e = pcd_trust_load(&r->trust, config->remote_signing_key,
                                                           config->remote_trusted_keys)) < 0) {
    pcache__free(r);
    return e;
  }
  if ((e = pcd_uv_err(uv_async_init(loop, &r->wake, on_wake))) < 0) {
    pcd_trust_clear(&r->trust);
    pcache__free(r);
    return e;
  }
  r->wake.data = r;
  uv_timer_init(loop, &r->retry_timer);
  r->retry_timer.data = r;
  uv_timer_init(loop, &r->sweep_timer);
  r->sweep_timer.data = r;
  pthread_mutex_init(&r->lock, NULL);
  log_info("remote: fleet tier %s, key prefix '%s', %s%s", pcd_remote_url(r), config->remote_prefix,
           r->password[0] ? "with AUTH, " : "",
           config->remote_ttl_s ? "keys expire" : "keys left to maxmemory");
  say_trust(r);
  pcd_remote_connect(r);
  sweep_soon(r);
  *ret_remote = r;
  return 0;
}

void pcd_remote_stop(pcd_remote *r) {
  PCACHE_QUEUE(pcd_ask) asks;
  pcd_push *p;
  pcd_ask *ask;
  if (!r || atomic_load(&r->state) == PCD_REMOTE_STOPPED)
    return;
  pthread_mutex_lock(&r->lock);
  r->stopped = 1;
  pcache_queue_take_all(&asks, &r->asks);
  while ((p = pcache_queue_pop(&r->pushes)) != NULL) {
    p->next = NULL;
    pcd_push_free_all(p);
  }
  r->queued = r->queued_bytes = 0;
  pthread_mutex_unlock(&r->lock);
  /* Stopped first, so that the drop neither warns nor retries; then the
   * callbacks (each ask whose last command this was is answered), then
   * whatever is still pending, then those never sent. */
  atomic_store(&r->state, PCD_REMOTE_STOPPED);
  pcd_remote_sync_stop(r);
  pcd_remote_drop(r, "stopping");
  pcd_remote_fetch_expire(r, UINT64_MAX);
  while ((ask = pcache_queue_pop(&asks)) != NULL) {
    r->done(ask->job);
    pcd_remote_ask_free(ask);
  }
  uv_close((uv_handle_t *)&r->wake, NULL);
  uv_close((uv_handle_t *)&r->retry_timer, NULL);
  uv_close((uv_handle_t *)&r->sweep_timer, NULL);
}

void pcd_remote_free(pcd_remote *r) {
  if (!r)
    return;
  pcd_trust_clear(&r->trust);
  pthread_mutex_destroy(&r->lock);
  pcache__free(r);
}
