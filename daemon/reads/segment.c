/* Shared-memory segments: the registry that holds them (segment.h), and
 * its builder thread; building one is segment_build.c's.
 *
 * Why a registry with a build lock rather than building in the writer:
 * an app's segment is wanted only when a client of it starts, and most
 * commits change apps nobody is starting; so a segment is built when it
 * is asked for and the store's change counter for the (device, app) pair
 * (pcd_store_app_gen) says the held one is out of date. The counter is
 * read before the build's read transaction, so a commit racing the build
 * leaves the new segment already out of date, never wrongly current. */
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/log.h"
#include "proto/segment.h"
#include "segment_build.h"

/* ------------------------------------------------------------- registry */

typedef struct seg {
  struct seg *next;
  uint8_t devkey[PCACHE_DEVKEY_SIZE];
  char app[PCD_MAX_APP + 1];
  uint64_t app_gen; /* pcd_store_app_gen before it was built */
  uint64_t last_used_us;
  pcd_segment_got got; /* got.fd: the registry's own descriptor */
  /* The lease pipe (see segment.h), made when a client first asks for a
   * lease; -1: none asked, so no client can hold one. */
  int lease_r, lease_w;
} seg;

/* A segment replaced or dropped while a client held its lease: counted
 * until the lease's read end hangs up. */
typedef struct retired {
  struct retired *next;
  int lease_r;
  uint64_t size;
} retired;

/* A build asked of the builder thread. */
typedef struct build_order {
  uint8_t devkey[PCACHE_DEVKEY_SIZE];
  char app[PCD_MAX_APP + 1];
} build_order;

#define BUILD_QUEUE 16

struct pcd_segments {
  pthread_mutex_t lock;       /* the list and its counts; the builder's queue */
  pthread_mutex_t build_lock; /* one build at a time: builds are rare, and big */
  const pcd_config *config;
  seg *head;
  uint64_t bytes, limit, idle_us, next_generation, max;
  uint64_t builds, drops, sent;
  retired *retired; /* still mapped by a client */
  uint64_t n_retired, retired_bytes;
  /* The builder thread (pcd_segments_build_later): started on first use,
   * joined by pcd_segments_stop. */
  pthread_t builder;
  pthread_cond_t wake;
  int builder_started, stopping;
  pcd_store *store;
  build_order queue[BUILD_QUEUE];
  size_t n_queue;
};

int pcd_segments_new(const pcd_config *config, pcd_segments **ret_segments) {
  pcd_segments *s = pcache__calloc(1, sizeof *s);
  if (!s)
    return -ENOMEM;
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->build_lock, NULL);
  pthread_cond_init(&s->wake, NULL);
  s->config = config;
  s->limit = config->segment_memory;
  s->idle_us = config->segment_idle_s * 1000000u;
  s->max = config->segment_max ? config->segment_max : 1;
  s->next_generation = 1;
  *ret_segments = s;
  return 0;
}

static void seg_free(seg *g) {
  if (g->got.fd >= 0)
    close(g->got.fd);
  if (g->lease_r >= 0)
    close(g->lease_r);
  if (g->lease_w >= 0)
    close(g->lease_w);
  pcache__free(g);
}

/* Whether a client asked for g's lease, so may map g after it is dropped. */
static int leased(const seg *g) { return g->lease_r >= 0; }

/* Unlinks *link (under lock). A segment with a lease becomes retired:
 * the daemon's write end closes, so the read end hangs up once no client
 * holds one (reap; at once when none does). */
static void drop_at(pcd_segments *s, seg **link) {
  seg *g = *link;
  retired *r = leased(g) ? pcache__calloc(1, sizeof *r) : NULL;
  *link = g->next;
  s->bytes -= g->got.size;
  s->drops++;
  if (leased(g) && !r)
    log_warn("segment: app '%s': out of memory; a client's mapping of it is no longer counted",
             g->app);
  if (r) {
    r->lease_r = g->lease_r;
    r->size = g->got.size;
    r->next = s->retired;
    s->retired = r;
    s->n_retired++;
    s->retired_bytes += r->size;
    g->lease_r = -1;
  }
  seg_free(g);
}

/* Forgets the retired segments no client maps any more: their lease's
 * read end hung up. One poll() over them all, no wait. Under lock. */
static void reap(pcd_segments *s) {
  struct pollfd *p;
  size_t n = 0;
  if (!s->retired)
    return;
  if (!(p = pcache__calloc(s->n_retired, sizeof *p)))
    return; /* counted a while longer */
  for (retired *r = s->retired; r; r = r->next)
    p[n++] = (struct pollfd){.fd = r->lease_r, .events = POLLIN};
  if (poll(p, (nfds_t)n, 0) > 0) {
    size_t i = 0;
    for (retired **link = &s->retired; *link; i++) {
      retired *r = *link;
      if (!(p[i].revents & (POLLHUP | POLLERR | POLLNVAL))) {
        link = &r->next;
        continue;
      }
      *link = r->next;
      close(r->lease_r);
      s->n_retired--;
      s->retired_bytes -= r->size;
      pcache__free(r);
    }
  }
  pcache__free(p);
}

void pcd_segments_stop(pcd_segments *s) {
  int started;
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  s->stopping = 1;
  started = s->builder_started;
  s->builder_started = 0;
  pthread_cond_signal(&s->wake);
  pthread_mutex_unlock(&s->lock);
  if (started)
    pthread_join(s->builder, NULL);
}

void pcd_segments_free(pcd_segments *segments) {
  if (!segments)
    return;
  pcd_segments_stop(segments);
  while (segments->head)
    drop_at(segments, &segments->head);
  while (segments->retired) {
    retired *r = segments->retired;
    segments->retired = r->next;
    close(r->lease_r);
    pcache__free(r);
  }
  pthread_cond_destroy(&segments->wake);
  pthread_mutex_destroy(&segments->lock);
  pthread_mutex_destroy(&segments->build_lock);
  pcache__free(segments);
}

static seg **find(pcd_segments *s, const uint8_t *devkey, const char *app) {
  seg **link = &s->head;
  for (; *link; link = &(*link)->next)
    if (memcmp((*link)->devkey, devkey, PCACHE_DEVKEY_SIZE) == 0 && strcmp((*link)->app, app) == 0)
      return link;
  return link;
}

/* New descriptors of g (and of its lease's write end, when asked for: the
 * pipe is made at the first such request) in *ret. 0 or -errno. Under
 * lock. */
static int give(pcd_segments *s, seg *g, int lease, uint64_t now_us, pcd_segment_got *ret) {
  *ret = g->got;
  ret->lease_fd = -1;
  if (lease && g->lease_w < 0) {
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) < 0)
      return -errno;
    g->lease_r = pipe_fds[0];
    g->lease_w = pipe_fds[1];
  }
  if ((ret->fd = fcntl(g->got.fd, F_DUPFD_CLOEXEC, 0)) < 0)
    return -errno;
  if (lease && (ret->lease_fd = fcntl(g->lease_w, F_DUPFD_CLOEXEC, 0)) < 0) {
    int r = -errno;
    close(ret->fd);
    ret->fd = -1;
    return r;
  }
  g->last_used_us = now_us;
  s->sent++;
  return 0;
}

/* The held segment, when it is current, as give() hands it (hand: else
 * nothing is handed). 1 when current, 0 when there is none, or a
 * negative code. */
static int hand_out(pcd_segments *s, pcd_store *store, const uint8_t *devkey, const char *app,
                    int hand, int lease, uint64_t now_us, pcd_segment_got *ret) {
  seg *g;
  int r = 0;
  pthread_mutex_lock(&s->lock);
  g = *find(s, devkey, app);
  if (g && g->app_gen == pcd_store_app_gen(store, devkey, app)) {
    r = hand ? give(s, g, lease, now_us, ret) : 0;
    r = r < 0 ? r : 1;
  }
  pthread_mutex_unlock(&s->lock);
  return r;
}

/* Bounds on descriptors (--segment-max, s->max): each held segment keeps
 * one open here (three once a client asked for its lease), each retired
 * one keeps one. Past max retired no new segment is held (the socket
 * serves) until holders let go; past max held the least recently handed
 * out go. So a client that makes many small apps, or holds many leases,
 * cannot use up the daemon's descriptors. */

/* Which of two held segments make_room drops first: one no client asked
 * a lease for (it frees its bytes), then the least recently handed out. */
static int drops_before(const seg *a, const seg *b) {
  if (leased(a) != leased(b))
    return !leased(a);
  return a->last_used_us < b->last_used_us;
}

/* The room left for a new segment beside the retired ones. Under lock. */
static uint64_t room_left(const pcd_segments *s) {
  return s->retired_bytes < s->limit ? s->limit - s->retired_bytes : 0;
}

/* Makes room for size more bytes beside the held and the retired ones:
 * the least recently handed out go first, those never leased before
 * those that were (dropping one a client still maps frees nothing: it
 * stays counted, retired). 1 when it fits. Under lock. */
static int make_room(pcd_segments *s, uint64_t size) {
  size_t held = 0;
  reap(s);
  if (size > room_left(s) || s->n_retired >= s->max)
    return 0; /* dropping held ones would not help */
  for (seg *g = s->head; g; g = g->next)
    held++;
  while (s->head && (s->bytes + s->retired_bytes + size > s->limit || held >= s->max)) {
    seg **pick = NULL;
    for (seg **link = &s->head; *link; link = &(*link)->next)
      if (!pick || drops_before(*link, *pick))
        pick = link;
    drop_at(s, pick);
    held--;
    reap(s);
  }
  return s->bytes + s->retired_bytes + size <= s->limit;
}

/* Builds the segment and holds it in place of the old one. */
static int build_and_hold(pcd_segments *s, pcd_store *store, const uint8_t *devkey, const char *app,
                          uint64_t now_us, seg *g) {
  pcd_seg_plan p = {0};
  uint64_t size = 0, room, t0 = pcache__mono_us();
  pcd_txn *txn = NULL;
  int r;
  g->app_gen = pcd_store_app_gen(store, devkey, app); /* before the read: see the top */
  if ((r = pcd_txn_begin(store, 0, &txn)) < 0)
    return r;
  pthread_mutex_lock(&s->lock);
  reap(s);
  room = room_left(s); /* what may fit beside what clients still map */
  pthread_mutex_unlock(&s->lock);
  if (room > PCACHE_SEG_MAX_SIZE)
    room = PCACHE_SEG_MAX_SIZE; /* a client maps no larger one */
  r = pcd_segment_plan(txn, s->config, devkey, app, room, &p);
  if (r == 0 && p.n == 0 && !p.snapshot_size)
    r = PCACHE_ENOT_FOUND; /* nothing to share */
  if (r == 0) {
    pthread_mutex_lock(&s->lock);
    g->got.generation = s->next_generation++;
    pthread_mutex_unlock(&s->lock);
    r = pcd_segment_write(&p, devkey, g->got.generation, &g->got.fd, &size);
  }
  pcd_txn_abort(txn);
  g->got.bad_keys = p.bad_keys; /* handed to the caller, built or not */
  g->got.n_bad = p.n_bad;
  p.bad_keys = NULL;
  if (r < 0)
    goto out;
  g->got.size = size;
  g->got.entries = (uint32_t)p.n;
  g->got.complete = p.complete;
  g->last_used_us = now_us;
  log_debug("segment: app '%s': %zu blobs (%zu not in its snapshot), %llu bytes, built in %llu us",
            app, p.n, p.n_uncovered, (unsigned long long)size,
            (unsigned long long)(pcache__mono_us() - t0));
out:
  pcd_segment_plan_free(&p);
  return r;
}

/* pcd_segments_get, and the builder thread's builds (hand 0: the
 * segment is built and held, nothing handed out or counted as sent). */
static int get_segment(pcd_segments *s, pcd_store *store, const uint8_t *devkey, const char *app,
                       int hand, int lease, uint64_t now_us, pcd_segment_got *ret) {
  seg *g = NULL, **link;
  uint8_t *bad_keys = NULL;
  size_t n_bad = 0;
  int r;
  *ret = (pcd_segment_got){.fd = -1, .lease_fd = -1};
  if (!s || s->limit == 0)
    return 0;
  if ((r = hand_out(s, store, devkey, app, hand, lease, now_us, ret)) != 0)
    return r < 0 ? r : 0;
  pthread_mutex_lock(&s->build_lock);
  /* Another thread may have built it while this one waited. */
  if ((r = hand_out(s, store, devkey, app, hand, lease, now_us, ret)) != 0)
    goto out_unlock;
  g = pcache__calloc(1, sizeof *g);
  if (!g) {
    r = -ENOMEM;
    goto out_unlock;
  }
  g->got.fd = g->got.lease_fd = g->lease_r = g->lease_w = -1;
  memcpy(g->devkey, devkey, PCACHE_DEVKEY_SIZE);
  snprintf(g->app, sizeof g->app, "%s", app);
  r = build_and_hold(s, store, devkey, app, now_us, g);
  bad_keys = g->got.bad_keys;
  n_bad = g->got.n_bad;
  g->got.bad_keys = NULL;
  g->got.n_bad = 0;
  pthread_mutex_lock(&s->lock);
  /* The old one goes whatever became of the new: it is out of date. */
  if (*(link = find(s, devkey, app)))
    drop_at(s, link);
  if (r == 0) {
    s->builds++;
    if (!make_room(s, g->got.size)) {
      r = PCACHE_ENOT_FOUND; /* larger than --segment-memory itself */
    } else {
      g->next = s->head;
      s->head = g;
      s->bytes += g->got.size;
      r = hand ? give(s, g, lease, now_us, ret) : 0;
      g = NULL;
    }
  }
  pthread_mutex_unlock(&s->lock);
  if (r == PCACHE_ENOT_FOUND)
    r = 0;
out_unlock:
  pthread_mutex_unlock(&s->build_lock);
  if (g)
    seg_free(g);
  if (r < 0)
    *ret = (pcd_segment_got){.fd = -1, .lease_fd = -1};
  ret->bad_keys = bad_keys;
  ret->n_bad = n_bad;
  return r > 0 ? 0 : r;
}

int pcd_segments_get(pcd_segments *s, pcd_store *store, const uint8_t *devkey, const char *app,
                     int lease, uint64_t now_us, pcd_segment_got *ret) {
  return get_segment(s, store, devkey, app, 1, lease, now_us, ret);
}

void pcd_segments_expire(pcd_segments *s, uint64_t now_us) {
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  reap(s);
  for (seg **link = &s->head; *link;) {
    if (now_us - (*link)->last_used_us >= s->idle_us)
      drop_at(s, link);
    else
      link = &(*link)->next;
  }
  pthread_mutex_unlock(&s->lock);
}

void pcd_segments_stats(pcd_segments *s, pcd_segment_stats *ret) {
  memset(ret, 0, sizeof *ret);
  if (!s)
    return;
  pthread_mutex_lock(&s->lock);
  reap(s);
  for (seg *g = s->head; g; g = g->next)
    ret->segments++;
  ret->retired = s->n_retired;
  ret->retired_bytes = s->retired_bytes;
  ret->bytes = s->bytes;
  ret->builds = s->builds;
  ret->drops = s->drops;
  ret->sent = s->sent;
  pthread_mutex_unlock(&s->lock);
}

/* The builder thread: one order at a time, each as pcd_segments_get
 * would build it, held for the next request. Blobs a build finds failing
 * their checksum are left out and logged; the next Get of one drops it. */
static void *builder_main(void *arg) {
  pcd_segments *s = arg;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    build_order o;
    pcd_segment_got got;
    while (!s->stopping && s->n_queue == 0)
      pthread_cond_wait(&s->wake, &s->lock);
    if (s->stopping)
      break;
    o = s->queue[0];
    memmove(s->queue, s->queue + 1, (s->n_queue - 1) * sizeof *s->queue);
    s->n_queue--;
    pthread_mutex_unlock(&s->lock);
    if (get_segment(s, s->store, o.devkey, o.app, 0, 0, pcache__mono_us(), &got) < 0)
      log_warn("segment: app '%s': the build failed; its clients use the socket", o.app);
    if (got.fd >= 0)
      close(got.fd);
    if (got.n_bad)
      log_error("segment: app '%s': %zu blobs failed their checksum and were left out", o.app,
                got.n_bad);
    pcache__free(got.bad_keys);
    pthread_mutex_lock(&s->lock);
  }
  pthread_mutex_unlock(&s->lock);
  return NULL;
}

int pcd_segments_ready(pcd_segments *s, pcd_store *store, const uint8_t *devkey, const char *app,
                       int lease, uint64_t now_us, pcd_segment_got *ret) {
  int r;
  *ret = (pcd_segment_got){.fd = -1, .lease_fd = -1};
  if (!s || s->limit == 0)
    return 0;
  if ((r = hand_out(s, store, devkey, app, 1, lease, now_us, ret)) != 0)
    return r < 0 ? r : 0;
  pthread_mutex_lock(&s->lock);
  for (size_t i = 0; i < s->n_queue; i++)
    if (memcmp(s->queue[i].devkey, devkey, PCACHE_DEVKEY_SIZE) == 0 &&
        strcmp(s->queue[i].app, app) == 0)
      goto out; /* asked already */
  if (s->stopping || s->n_queue == BUILD_QUEUE)
    goto out; /* a later request asks again */
  if (!s->builder_started) {
    if (pthread_create(&s->builder, NULL, builder_main, s) != 0)
      goto out;
    s->builder_started = 1;
  }
  s->store = store;
  memcpy(s->queue[s->n_queue].devkey, devkey, PCACHE_DEVKEY_SIZE);
  snprintf(s->queue[s->n_queue].app, sizeof s->queue[s->n_queue].app, "%s", app);
  s->n_queue++;
  pthread_cond_signal(&s->wake);
out:
  pthread_mutex_unlock(&s->lock);
  return 0;
}
