/* Shared-memory segments: building one (the layout is proto/segment.h's)
 * and the registry that holds them (segment.h).
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
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "app_order.h"
#include "bulk.h"
#include "common/alloc.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "common/log.h"
#include "proto/segment.h"

/* ---------------------------------------------------------------- build */

/* One blob chosen for the segment. */
typedef struct seg_item {
  uint8_t hash[PCACHE_HASH_SIZE];
  const uint8_t *blob; /* in the read transaction's map */
  uint64_t offset, size, checksum;
  uint32_t kind, flags, order; /* order: its position in the data */
} seg_item;

typedef struct seg_plan {
  uint8_t *bad_keys; /* blobs that failed their checksum, n_bad keys */
  size_t n_bad;
  seg_item *items;
  size_t n, n_uncovered;
  uint8_t *snap_hashes; /* the snapshot's hashes that have entries, n_snap × 16 */
  uint32_t n_snap;
  const uint8_t *snapshot;
  uint64_t snapshot_size, snapshot_checksum;
  int complete;
} seg_plan;

static int by_hash(const void *a, const void *b) { return memcmp(a, b, PCACHE_HASH_SIZE); }

static int item_by_hash(const void *a, const void *b) {
  return memcmp(((const seg_item *)a)->hash, ((const seg_item *)b)->hash, PCACHE_HASH_SIZE);
}

/* The snapshot, when it is sound: its blob, and the hashes it covers that
 * still have an entry (of any app, as a Prefetch reports them), sorted. A
 * snapshot that fails its checksum is left out (a Prefetch drops it). */
static int plan_snapshot(pcd_txn *txn, const uint8_t *devkey, const char *app, seg_plan *p) {
  pcd_snapshot meta;
  const uint8_t *hashes, *blob;
  if (pcd_snapshot_get(txn, devkey, app, &meta, &hashes, &blob) < 0 ||
      meta.n_hashes > PCACHE_SEG_MAX_SNAP_HASHES ||
      pcache__checksum64(blob, meta.blob_size) != meta.checksum)
    return 0;
  p->snap_hashes = pcache__malloc(meta.n_hashes ? meta.n_hashes * PCACHE_HASH_SIZE : 1);
  if (!p->snap_hashes)
    return -ENOMEM;
  for (uint64_t i = 0; i < meta.n_hashes; i++) {
    uint8_t key[PCD_ENTRY_KEY_SIZE];
    pcd_entry e;
    memcpy(key, devkey, PCACHE_DEVKEY_SIZE);
    memcpy(key + PCACHE_DEVKEY_SIZE, hashes + i * PCACHE_HASH_SIZE, PCACHE_HASH_SIZE);
    if (pcd_entry_get(txn, key, &e) == 0)
      memcpy(p->snap_hashes + (size_t)p->n_snap++ * PCACHE_HASH_SIZE, key + PCACHE_DEVKEY_SIZE,
             PCACHE_HASH_SIZE);
  }
  if (p->n_snap)
    qsort(p->snap_hashes, p->n_snap, PCACHE_HASH_SIZE, by_hash);
  p->snapshot = blob;
  p->snapshot_size = meta.blob_size;
  p->snapshot_checksum = meta.checksum;
  return 0;
}

/* Adds ref's blob to the plan if it is sound and fits in *io_room. */
static void plan_blob(pcd_txn *txn, const pcd_order_ref *ref, uint32_t flags, seg_plan *p,
                      uint64_t *io_room) {
  const uint8_t *blob;
  size_t size;
  seg_item *it;
  if (ref->blob_size > *io_room) {
    p->complete = 0;
    return;
  }
  /* As a Get would: a blob that is missing or fails its checksum is never
   * handed out (the socket path drops it when it is next asked for). */
  if (pcd_blob_get(txn, ref->key, &blob, &size) < 0)
    return;
  if (size != ref->blob_size || pcache__checksum64(blob, size) != ref->checksum) {
    uint8_t *k = pcache__realloc(p->bad_keys, (p->n_bad + 1) * PCD_ENTRY_KEY_SIZE);
    if (k) {
      memcpy(k + p->n_bad++ * PCD_ENTRY_KEY_SIZE, ref->key, PCD_ENTRY_KEY_SIZE);
      p->bad_keys = k;
    }
    return;
  }
  it = &p->items[p->n++];
  memcpy(it->hash, ref->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  it->blob = blob;
  it->size = size;
  it->checksum = ref->checksum;
  it->kind = ref->kind;
  it->flags = flags;
  it->order = (uint32_t)(p->n - 1);
  *io_room -= size;
}

/* What the segment holds, in data order: the blobs the snapshot does not
 * cover (what a Prefetch sends), then those it does (what a client that
 * does not load the snapshot fetches per miss), each in the app's order,
 * while they fit under cap with the snapshot and the tables. */
static int plan(pcd_txn *txn, const pcd_config *cfg, const uint8_t *devkey, const char *app,
                uint64_t cap, seg_plan *p) {
  pcd_order_vec ev = {0};
  uint64_t newest = 0, room;
  size_t n;
  int r = pcd_order_collect(txn, devkey, app, &ev, &newest);
  if (r < 0)
    goto out;
  pcd_order_sort(&ev);
  n = pcd_order_likely(&ev, newest, cfg);
  if (n > PCACHE_SEG_MAX_ENTRIES)
    n = PCACHE_SEG_MAX_ENTRIES;
  if ((r = plan_snapshot(txn, devkey, app, p)) < 0)
    goto out;
  p->items = pcache__malloc((n ? n : 1) * sizeof *p->items);
  if (!p->items) {
    r = -ENOMEM;
    goto out;
  }
  p->complete = 1;
  room = PCACHE_SEG_HEADER_SIZE + (uint64_t)n * (PCACHE_SEG_INDEX_ENTRY + 4) +
         (uint64_t)p->n_snap * PCACHE_HASH_SIZE + p->snapshot_size;
  room = room < cap ? cap - room : 0;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < n; i++) {
      const uint8_t *h = ev.items[i].key + PCACHE_DEVKEY_SIZE;
      int covered = p->n_snap && bsearch(h, p->snap_hashes, p->n_snap, PCACHE_HASH_SIZE, by_hash);
      if (covered == pass)
        plan_blob(txn, &ev.items[i], covered ? PCACHE_SEG_COVERED : 0, p, &room);
    }
    if (pass == 0)
      p->n_uncovered = p->n;
  }
out:
  pcache_vec_free(&ev);
  return r;
}

static void plan_free(seg_plan *p) {
  pcache__free(p->items);
  pcache__free(p->snap_hashes);
  pcache__free(p->bad_keys);
}

/* Lays the plan out (offsets, header, tables) in a buffer of the tables'
 * size (*ret_tables bytes); *ret_size is the whole segment's. */
static uint8_t *lay_out(seg_plan *p, const uint8_t *devkey, uint64_t generation,
                        uint64_t *ret_tables, uint64_t *ret_size) {
  uint64_t index_off = PCACHE_SEG_HEADER_SIZE,
           order_off = index_off + (uint64_t)p->n * PCACHE_SEG_INDEX_ENTRY,
           snap_off = order_off + (uint64_t)p->n * 4,
           tables = snap_off + (uint64_t)p->n_snap * PCACHE_HASH_SIZE, at = tables;
  uint8_t *b = pcache__calloc(1, tables);
  if (!b)
    return NULL;
  at += p->snapshot_size;
  for (size_t i = 0; i < p->n; i++) {
    p->items[i].offset = at;
    at += p->items[i].size;
  }
  memcpy(b + PCACHE_SEG_OFF_MAGIC, PCACHE_SEG_MAGIC, 8);
  pcache__put_le32(b + PCACHE_SEG_OFF_VERSION, PCACHE_SEG_VERSION);
  pcache__put_le32(b + PCACHE_SEG_OFF_HEADER_SIZE, PCACHE_SEG_HEADER_SIZE);
  pcache__put_le64(b + PCACHE_SEG_OFF_SIZE, at);
  memcpy(b + PCACHE_SEG_OFF_DEVKEY, devkey, PCACHE_DEVKEY_SIZE);
  pcache__put_le64(b + PCACHE_SEG_OFF_GENERATION, generation);
  pcache__put_le32(b + PCACHE_SEG_OFF_N_ENTRIES, (uint32_t)p->n);
  pcache__put_le32(b + PCACHE_SEG_OFF_FLAGS, p->complete ? PCACHE_SEG_COMPLETE : 0);
  pcache__put_le64(b + PCACHE_SEG_OFF_INDEX, index_off);
  pcache__put_le64(b + PCACHE_SEG_OFF_ORDER, order_off);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAP_HASHES, snap_off);
  pcache__put_le32(b + PCACHE_SEG_OFF_N_SNAP_HASHES, p->n_snap);
  pcache__put_le32(b + PCACHE_SEG_OFF_N_UNCOVERED, (uint32_t)p->n_uncovered);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAPSHOT, tables);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAPSHOT_SIZE, p->snapshot_size);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAPSHOT_SUM, p->snapshot_checksum);
  pcache__put_le64(b + PCACHE_SEG_OFF_DATA, tables);
  /* The index is sorted by hash; the order says where each one lies. */
  for (size_t i = 0; i < p->n; i++)
    p->items[i].order = (uint32_t)i;
  qsort(p->items, p->n, sizeof *p->items, item_by_hash);
  for (size_t i = 0; i < p->n; i++) {
    uint8_t *e = b + index_off + i * PCACHE_SEG_INDEX_ENTRY;
    memcpy(e, p->items[i].hash, PCACHE_HASH_SIZE);
    pcache__put_le64(e + 16, p->items[i].offset);
    pcache__put_le64(e + 24, p->items[i].size);
    pcache__put_le64(e + 32, p->items[i].checksum);
    pcache__put_le32(e + 40, p->items[i].kind);
    pcache__put_le32(e + 44, p->items[i].flags);
    pcache__put_le32(b + order_off + (uint64_t)p->items[i].order * 4, (uint32_t)i);
  }
  if (p->n_snap)
    memcpy(b + snap_off, p->snap_hashes, (size_t)p->n_snap * PCACHE_HASH_SIZE);
  pcache__put_le64(b + PCACHE_SEG_OFF_TABLE_SUM, pcache__seg_table_checksum(b, tables));
  *ret_tables = tables;
  *ret_size = at;
  return b;
}

/* Writes the tables, the snapshot and the blobs (straight from the
 * store's map, in data order) into a new memfd and seals it. */
static int write_segment(const seg_plan *p, const uint8_t *tables, uint64_t tables_size,
                         uint64_t size, int *ret_fd) {
  enum { BATCH = 1024 }; /* IOV_MAX on Linux */
  struct iovec iov[BATCH];
  uint64_t off = 0;
  seg_item **by_order = NULL;
  int fd = memfd_create("pcache-segment", MFD_ALLOW_SEALING | MFD_CLOEXEC), n = 0, r;
  if (fd < 0)
    return -errno;
  /* Sized first: the pages are allocated as they are written either way,
   * but a reader of a half-written file would see its true length. */
  if (ftruncate(fd, (off_t)size) < 0) {
    r = -errno;
    goto out;
  }
  by_order = pcache__malloc((p->n ? p->n : 1) * sizeof *by_order);
  if (!by_order) {
    r = -ENOMEM;
    goto out;
  }
  /* The items are in index order now; `order` is each one's place. */
  for (size_t i = 0; i < p->n; i++)
    by_order[p->items[i].order] = &p->items[i];
  iov[n++] = (struct iovec){(void *)tables, tables_size};
  if (p->snapshot_size)
    iov[n++] = (struct iovec){(void *)p->snapshot, p->snapshot_size};
  r = 0;
  for (size_t i = 0; i < p->n && r == 0; i++) {
    const seg_item *it = by_order[i];
    if (it->size)
      iov[n++] = (struct iovec){(void *)it->blob, it->size};
    if (n == BATCH) {
      r = pcd_write_iov(fd, iov, n, &off);
      n = 0;
    }
  }
  if (r == 0 && n)
    r = pcd_write_iov(fd, iov, n, &off);
  if (r == 0 && off != size)
    r = -EIO;
  if (r == 0 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    r = -errno;
out:
  pcache__free(by_order);
  if (r < 0) {
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

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
static int build_and_hold(pcd_segments *s, pcd_store *store, const uint8_t *devkey,
                          const char *app, uint64_t now_us, seg *g) {
  seg_plan p = {0};
  uint8_t *tables = NULL;
  uint64_t tables_size = 0, size = 0, room, t0 = pcache__mono_us();
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
  r = plan(txn, s->config, devkey, app, room, &p);
  if (r == 0 && p.n == 0 && !p.snapshot_size)
    r = PCACHE_ENOT_FOUND; /* nothing to share */
  if (r == 0) {
    pthread_mutex_lock(&s->lock);
    g->got.generation = s->next_generation++;
    pthread_mutex_unlock(&s->lock);
    tables = lay_out(&p, devkey, g->got.generation, &tables_size, &size);
    r = tables ? write_segment(&p, tables, tables_size, size, &g->got.fd) : -ENOMEM;
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
  pcache__free(tables);
  plan_free(&p);
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
