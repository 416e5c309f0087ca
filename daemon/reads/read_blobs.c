/* Get and Prefetch: blobs out of the store on the connection's I/O thread,
 * each reply in one short read transaction, checked against its checksum
 * before it is sent, bounded by the client's reply budget, and the hits
 * recorded in the worker's touch set for the writer. Prefetch pages the
 * (device, app) entries the app is likely to use, most recently used
 * first, and leads with the app's snapshot; the connection keeps the
 * order between pages (prefetch_cursor.h).
 *
 * What counts as use: a Get (a miss that asked for the entry), and what a
 * client reports it built from a prefetched blob (Report.used,
 * ops_report.c). Sending a blob in a Prefetch is not use: counted as a
 * hit and touched, every entry an app ever made would stay "recent" for
 * as long as it starts, and every start would send them all. */
#include "reads.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "app_order.h"
#include "common/arena.h"
#include "common/alloc.h"
#include "common/log.h"
#include "common/vec.h"
#include "prefetch_cursor.h"
#include "proto/frame.h"
#include "respond.h"
#include "server.h"
#include "window.h"

/* Most blob bytes one Get or Prefetch reply carries, whatever the
 * client's budget (it goes in a memfd); more come in the next page
 * (GetReply.more). */
#define PREFETCH_MAX_BYTES PCACHE_REPLY_PAGE_MAX

typedef struct blob_set {
  pcd_server *srv;
  pcd_worker *w;
  pcd_txn *txn;
  pcache__arena *arena;
  Pcachepb__GetReply *reply;
  size_t cap;
  uint64_t bytes, now;
  pcd_touch *drops;
  size_t n_drops;
  int missing_blob; /* add_blob's last entry had no blob */
  int prefetch;     /* a Prefetch: what it sends is not touched (not used yet) */
} blob_set;

static int add_drop(blob_set *s, const uint8_t *key) {
  pcd_touch *d = pcache__realloc(s->drops, (s->n_drops + 1) * sizeof *d);
  if (!d)
    return -ENOMEM;
  memset(&d[s->n_drops], 0, sizeof *d);
  memcpy(d[s->n_drops].key, key, PCD_ENTRY_KEY_SIZE);
  s->drops = d;
  s->n_drops++;
  return 0;
}

typedef pcd_order_ref blob_ref;

/* A blob read for a Get is rarely in the CPU's caches, and the hardware
 * prefetcher does not cross 4 KiB pages: each page's first read would
 * wait for its translation and its first line, one page after another.
 * Asking for the first pages' first lines up front lets those waits
 * overlap; the checksum then streams. Only the first PREFETCH_PAGES: the
 * lines of a larger blob's later pages would leave the cache before the
 * checksum reached them. */
#define PREFETCH_PAGES 32

static void prefetch_pages(const uint8_t *p, size_t size) {
  uintptr_t at = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + size;
  if (size > (size_t)PREFETCH_PAGES * 4096)
    end = (uintptr_t)p + (size_t)PREFETCH_PAGES * 4096;
  for (; at < end; at = (at | 4095) + 1) {
    __builtin_prefetch((const void *)at);
    if (at + 64 < end)
      __builtin_prefetch((const void *)(at + 64));
  }
}

/* Adds the entry's blob to the reply after checking it against its
 * checksum. Returns 0 when added, PCACHE_ENOT_FOUND when the blob is not
 * there or failed its checksum (dropped), or another negative code. */
static int add_blob(blob_set *s, const blob_ref *e) {
  Pcachepb__Blob *b;
  const uint8_t *blob;
  size_t size;
  char hex[33];
  int r = pcd_blob_get(s->txn, e->key, &blob, &size);
  s->missing_blob = r == PCACHE_ENOT_FOUND;
  if (r < 0)
    return r;
  prefetch_pages(blob, size);
  if (size != e->blob_size || pcache__checksum64(blob, size) != e->checksum) {
    pcache__hex(e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE, hex);
    log_error("store: entry %s failed its checksum; dropping it, never sent", hex);
    atomic_fetch_add(&s->srv->stats.checksum_failures, 1);
    s->reply->dropped++;
    add_drop(s, e->key);
    return PCACHE_ENOT_FOUND;
  }
  s->reply->blobs = pcache__arena_grow(s->arena, s->reply->blobs, s->reply->n_blobs, &s->cap,
                                       sizeof *s->reply->blobs);
  if (!s->reply->blobs)
    return -ENOMEM;
  b = pcache__arena_alloc(s->arena, sizeof *b);
  if (!b)
    return -ENOMEM;
  pcachepb__blob__init(b);
  b->state_hash.len = PCACHE_HASH_SIZE;
  b->state_hash.data =
      pcache__arena_memdup(s->arena, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  /* Points into the read transaction's map: packed before it ends. */
  b->blob.data = (uint8_t *)blob;
  b->blob.len = size;
  b->checksum = e->checksum;
  b->kind = (Pcachepb__EntryKind)e->kind;
  s->reply->blobs[s->reply->n_blobs++] = b;
  s->bytes += size;
  if (!s->prefetch)
    pcd_worker_touch(s->w, e->key, s->now);
  return 0;
}

/* The reply's blob bytes go into the connection's reply window when it
 * has one, they fit, and the client has taken the window's last reply
 * (window_taken, from the request); else in the frame. Returns whether
 * they went. */
static int to_window(pcd_conn *c, Pcachepb__GetReply *reply, uint64_t window_taken) {
  switch (pcd_window_place(c->window, reply, window_taken)) {
  case PCD_WINDOW_USED:
    atomic_fetch_add(&c->srv->stats.window_replies, 1);
    return 1;
  case PCD_WINDOW_BUSY:
    atomic_fetch_add(&c->srv->stats.window_busy, 1);
    return 0;
  case PCD_WINDOW_NONE:
    break;
  }
  return 0;
}

/* Sends the reply (its blobs still in the read transaction's map) and ends
 * the transaction. */
static void finish_blobs(pcd_conn *c, blob_set *s, Pcachepb__Response *resp,
                         uint64_t window_taken) {
  int placed = resp->status == 0 && to_window(c, s->reply, window_taken);
  if (pcd_respond(c, resp) < 0 && placed)
    pcd_window_unplace(c->window); /* never sent: the client's count did not move */
  pcd_txn_abort(s->txn);
  if (s->n_drops && c->srv->writer) {
    pcd_job *job = pcd_job_new(PCD_JOB_DROP);
    if (job) {
      job->touches = s->drops;
      job->n_touches = s->n_drops;
      s->drops = NULL;
      pcd_writer_submit(c->srv->writer, job);
    }
  }
  pcache__free(s->drops);
}

/* Most blob bytes one Get or Prefetch reply carries beyond its first
 * item: what is left of the client's --max-pending budget, and never more
 * than PREFETCH_MAX_BYTES. The first blob (with the first page's
 * snapshot) always goes, so any entry can be fetched. */
static uint64_t reply_bound(const pcd_conn *c) {
  uint64_t b = pcd_conn_reply_budget(c);
  return b < PREFETCH_MAX_BYTES ? b : PREFETCH_MAX_BYTES;
}

/* Whether blob_size more bytes would take the reply past bound. */
static int reply_full(const blob_set *s, uint64_t bound, uint64_t blob_size) {
  return s->reply->n_blobs && s->bytes + blob_size > bound;
}

typedef struct hash_at {
  const uint8_t *hash;
  size_t at;
} hash_at;

static int by_hash_then_at(const void *a, const void *b) {
  const hash_at *x = a, *y = b;
  int c = memcmp(x->hash, y->hash, PCACHE_HASH_SIZE);
  return c ? c : x->at < y->at ? -1 : x->at > y->at;
}

/* Marks in ret_dup (n bytes) every hash that an earlier one repeats, so
 * that a hash named many times is looked up, sent and counted once.
 * Returns 0 or -ENOMEM. */
static int mark_repeats(const ProtobufCBinaryData *hashes, size_t n, uint8_t *ret_dup) {
  hash_at *v;
  if (n < 2)
    return 0;
  v = pcache__malloc(n * sizeof *v);
  if (!v)
    return -ENOMEM;
  for (size_t i = 0; i < n; i++)
    v[i] = (hash_at){hashes[i].data, i};
  qsort(v, n, sizeof *v, by_hash_then_at);
  for (size_t i = 1; i < n; i++)
    if (memcmp(v[i].hash, v[i - 1].hash, PCACHE_HASH_SIZE) == 0)
      ret_dup[v[i].at] = 1;
  pcache__free(v);
  return 0;
}

void pcd_read_get(pcd_conn *c, const Pcachepb__Get *g) {
  pcd_server *srv = c->srv;
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__GetReply reply = PCACHEPB__GET_REPLY__INIT;
  max_align_t first[2048 / sizeof(max_align_t)]; /* a Get of a few hashes fits */
  pcache__arena arena = pcache__arena_in(first, sizeof first);
  blob_set s = {.srv = srv, .w = c->worker, .arena = &arena, .reply = &reply, .now = pcd_now_us()};
  uint64_t bound = reply_bound(c);
  uint8_t *dup;
  int r;

  atomic_fetch_add(&srv->stats.gets, 1);
  if ((r = pcd_txn_begin(srv->store, 0, &s.txn)) < 0) {
    pcd_respond_error(c, r, NULL);
    return;
  }
  reply.missing = pcache__arena_alloc(&arena, (g->n_state_hashes + 1) * sizeof *reply.missing);
  dup = pcache__arena_alloc(&arena, g->n_state_hashes + 1);
  if (dup) {
    memset(dup, 0, g->n_state_hashes + 1);
    r = mark_repeats(g->state_hashes, g->n_state_hashes, dup);
  }
  for (size_t i = 0; r == 0 && reply.missing && dup && i < g->n_state_hashes; i++) {
    pcd_entry e;
    uint8_t key[PCD_ENTRY_KEY_SIZE];
    if (dup[i])
      continue;
    memcpy(key, g->device_key.data, PCACHE_DEVKEY_SIZE);
    memcpy(key + PCACHE_DEVKEY_SIZE, g->state_hashes[i].data, PCACHE_HASH_SIZE);
    r = pcd_entry_get(s.txn, key, &e);
    if (r == 0 && reply_full(&s, bound, e.blob_size)) {
      /* The rest is neither sent nor missing: the client asks again. */
      reply.more = 1;
      break;
    }
    if (r == 0) {
      blob_ref ref;
      pcd_order_ref_of(&e, &ref);
      r = add_blob(&s, &ref);
    }
    if (r < 0 && r != PCACHE_ENOT_FOUND && r != PCACHE_ESTORE)
      break;
    if (r == 0) {
      atomic_fetch_add(&srv->stats.hits, 1);
    } else {
      atomic_fetch_add(&srv->stats.misses, 1);
      reply.missing[reply.n_missing++] = g->state_hashes[i];
    }
    r = 0;
  }
  if (r < 0 || arena.failed) {
    resp.status = r < 0 ? r : -ENOMEM;
  } else {
    resp.body_case = PCACHEPB__RESPONSE__BODY_GET;
    resp.get = &reply;
  }
  finish_blobs(c, &s, &resp, g->window_taken);
  pcache__arena_free(&arena);
  /* Reply structures and the request's hashes: ~128 bytes a blob. */
  pcd_server_trim(g->n_state_hashes * 128u);
}

typedef pcd_order_vec entry_vec;

static int by_hash(const void *a, const void *b) { return memcmp(a, b, PCACHE_HASH_SIZE); }

/* The (device, app) snapshot as a Prefetch sees it: its hash list, sorted
 * for lookups, and on the first page the blob and the covered hashes that
 * still have entries. */
typedef struct snap_view {
  pcd_snapshot meta;
  const uint8_t *blob;
  uint8_t *sorted;  /* n_hashes × 16, sorted */
  uint8_t *present; /* per sorted hash: its entry exists */
  int have;
} snap_view;

static void snap_view_free(snap_view *v) {
  pcache__free(v->sorted);
  pcache__free(v->present);
}

/* Loads the snapshot; a missing, unreadable or (first page) corrupted one
 * is as if there were none; a corrupted one is dropped. Returns 0 or
 * -ENOMEM. */
static int snap_view_load(blob_set *s, const uint8_t *devkey, const char *app, int first_page,
                          snap_view *ret) {
  const uint8_t *hashes;
  size_t n;
  memset(ret, 0, sizeof *ret);
  if (pcd_snapshot_get(s->txn, devkey, app, &ret->meta, &hashes, &ret->blob) < 0)
    return 0;
  if (first_page && pcache__checksum64(ret->blob, ret->meta.blob_size) != ret->meta.checksum) {
    pcd_job *job = pcd_job_new(PCD_JOB_SNAPSHOT_DROP);
    log_error("store: the snapshot of app '%s' failed its checksum; dropping it, never sent", app);
    atomic_fetch_add(&s->srv->stats.checksum_failures, 1);
    if (job && s->srv->writer) {
      memcpy(job->device_key, devkey, PCACHE_DEVKEY_SIZE);
      snprintf(job->app, sizeof job->app, "%s", app);
      pcd_writer_submit(s->srv->writer, job);
    } else {
      pcd_job_free(job);
    }
    return 0;
  }
  n = ret->meta.n_hashes;
  ret->sorted = pcache__malloc(n ? n * PCACHE_HASH_SIZE : 1);
  ret->present = pcache__calloc(n ? n : 1, 1);
  if (!ret->sorted || !ret->present) {
    snap_view_free(ret);
    return -ENOMEM;
  }
  if (n) {
    memcpy(ret->sorted, hashes, n * PCACHE_HASH_SIZE);
    qsort(ret->sorted, n, PCACHE_HASH_SIZE, by_hash);
  }
  ret->have = 1;
  return 0;
}

/* Index of hash in the snapshot's sorted list, or -1. */
static long snap_find(const snap_view *v, const uint8_t *hash) {
  size_t lo = 0, hi = v->have ? v->meta.n_hashes : 0;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = memcmp(v->sorted + mid * PCACHE_HASH_SIZE, hash, PCACHE_HASH_SIZE);
    if (c == 0)
      return (long)mid;
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return -1;
}

/* Drops the snapshot's entries from ev (they travel in the snapshot),
 * marking them present; on the first page, which reports them, the
 * snapshot's other hashes are looked up, since another app may have filed
 * the entry (a Get by this app fetched it). */
static void snap_filter(blob_set *s, const uint8_t *devkey, snap_view *v, entry_vec *ev,
                        int first_page) {
  size_t kept = 0;
  if (!v->have)
    return;
  for (size_t i = 0; i < ev->n; i++) {
    long at = snap_find(v, ev->items[i].key + PCACHE_DEVKEY_SIZE);
    if (at < 0) {
      ev->items[kept++] = ev->items[i];
      continue;
    }
    v->present[at] = 1;
  }
  ev->n = kept;
  for (size_t i = 0; first_page && i < v->meta.n_hashes; i++) {
    uint8_t key[PCD_ENTRY_KEY_SIZE];
    pcd_entry e;
    if (v->present[i])
      continue;
    memcpy(key, devkey, PCACHE_DEVKEY_SIZE);
    memcpy(key + PCACHE_DEVKEY_SIZE, v->sorted + i * PCACHE_HASH_SIZE, PCACHE_HASH_SIZE);
    v->present[i] = pcd_entry_get(s->txn, key, &e) == 0;
  }
}

/* The first page's snapshot fields; the covered entries count as found
 * (Stats.hits), but are not touched: the client reports the ones it
 * uses. */
static void snap_reply(blob_set *s, const uint8_t *devkey, const snap_view *v) {
  Pcachepb__GetReply *reply = s->reply;
  Pcachepb__Blob *b;
  size_t n = 0;
  if (!v->have)
    return;
  b = pcache__arena_alloc(s->arena, sizeof *b);
  reply->snapshot_hashes =
      pcache__arena_alloc(s->arena, (v->meta.n_hashes + 1) * sizeof *reply->snapshot_hashes);
  if (!b || !reply->snapshot_hashes)
    return; /* arena.failed: the reply becomes -ENOMEM */
  pcachepb__blob__init(b);
  /* Points into the read transaction's map: packed before it ends. */
  b->blob.data = (uint8_t *)v->blob;
  b->blob.len = v->meta.blob_size;
  b->checksum = v->meta.checksum;
  reply->snapshot = b;
  for (size_t i = 0; i < v->meta.n_hashes; i++) {
    if (!v->present[i])
      continue;
    reply->snapshot_hashes[n].data = v->sorted + i * PCACHE_HASH_SIZE;
    reply->snapshot_hashes[n].len = PCACHE_HASH_SIZE;
    n++;
    atomic_fetch_add(&s->srv->stats.hits, 1);
  }
  reply->n_snapshot_hashes = n;
  s->bytes += v->meta.blob_size;
}

/* A Prefetch's page order from some position: the refs this page
 * collected, or the state hashes a connection's cursor kept. */
typedef struct page_order {
  const blob_ref *refs;              /* collected: n refs */
  const pcd_prefetch_cursor *cursor; /* or its hashes [at, n) */
  size_t n;
} page_order;

/* The order's i-th entry. A cursor's entry is read again: it may have
 * been replaced since (a new blob and checksum), or be gone (evicted,
 * purged, dropped: PCACHE_ENOT_FOUND; a record that does not decode,
 * PCACHE_ESTORE), which a collection now would not list either. */
static int order_entry(blob_set *s, const page_order *o, const uint8_t *devkey, size_t i,
                       blob_ref *ret) {
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  int r;
  if (!o->cursor) {
    *ret = o->refs[i];
    return 0;
  }
  memcpy(key, devkey, PCACHE_DEVKEY_SIZE);
  memcpy(key + PCACHE_DEVKEY_SIZE, o->cursor->hashes + i * PCACHE_HASH_SIZE, PCACHE_HASH_SIZE);
  if ((r = pcd_entry_get(s->txn, key, &e)) < 0)
    return r;
  pcd_order_ref_of(&e, ret);
  return 0;
}

/* Fills the reply from position *io_at of the order until the page is
 * full (GetReply.more) or the order ends; *io_at becomes the position of
 * the first entry not consumed. Returns 0 or a negative code. */
static int fill_page(blob_set *s, const page_order *o, const uint8_t *devkey, size_t limit,
                     uint64_t bound, size_t *io_at) {
  Pcachepb__GetReply *reply = s->reply;
  size_t i;
  int r = 0;
  for (i = *io_at; i < o->n; i++) {
    blob_ref ref;
    if (order_entry(s, o, devkey, i, &ref) < 0)
      continue; /* not in the order any more: neither sent nor dropped */
    if (reply->n_blobs + reply->dropped >= limit || reply_full(s, bound, ref.blob_size)) {
      reply->more = 1;
      break;
    }
    r = add_blob(s, &ref);
    if (r < 0 && r != PCACHE_ENOT_FOUND)
      break;
    if (r == 0)
      atomic_fetch_add(&s->srv->stats.hits, 1);
    else
      reply->dropped += s->missing_blob; /* consumed: counted for the next offset */
    r = 0;
  }
  *io_at = i;
  return r;
}

/* Collects the (device, app) entries in page order, most recently used
 * first, less those the snapshot covers (the first page, offset 0, gets
 * the snapshot itself), cut to those the app is likely to use: one scan,
 * counted in Stats.prefetch_scans. */
static int collect_order(blob_set *s, const Pcachepb__Prefetch *p, const char *app, snap_view *snap,
                         entry_vec *ev) {
  uint64_t newest_us = 0;
  int r;
  atomic_fetch_add(&s->srv->stats.prefetch_scans, 1);
  /* The latest use counts the snapshot's entries, taken out below. */
  r = pcd_order_collect(s->txn, p->device_key.data, app, ev, &newest_us);
  /* Every page leaves the snapshot's entries out, so that offsets count
   * the same list; only the first sends the snapshot itself. */
  if (r == 0 && p->snapshot)
    r = snap_view_load(s, p->device_key.data, app, p->offset == 0, snap);
  if (r < 0)
    return r;
  snap_filter(s, p->device_key.data, snap, ev, p->offset == 0);
  if (p->offset == 0)
    snap_reply(s, p->device_key.data, snap);
  pcd_order_sort(ev);
  ev->n = pcd_order_likely(ev, newest_us, s->srv->config);
  return 0;
}

/* Keeps what is left of a collected order after this page on the
 * connection, as much of it as a cursor holds. No memory: the next page
 * collects again. */
static void keep_cursor(pcd_conn *c, const Pcachepb__Prefetch *p, const char *app,
                        const entry_vec *ev, size_t at, uint64_t now_us) {
  size_t left = ev->n - at, n = left < PCD_CURSOR_MAX_HASHES ? left : PCD_CURSOR_MAX_HASHES;
  pcd_prefetch_cursor *cur =
      pcd_prefetch_cursor_new(p->device_key.data, app, p->snapshot, n, now_us);
  if (!cur)
    return;
  for (size_t i = 0; i < n; i++)
    memcpy(cur->hashes + i * PCACHE_HASH_SIZE, ev->items[at + i].key + PCACHE_DEVKEY_SIZE,
           PCACHE_HASH_SIZE);
  cur->complete = n == left;
  c->cursor = cur;
}

void pcd_read_prefetch(pcd_conn *c, const Pcachepb__Prefetch *p) {
  pcd_server *srv = c->srv;
  Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
  Pcachepb__GetReply reply = PCACHEPB__GET_REPLY__INIT;
  pcache__arena arena = {0};
  blob_set s = {.srv = srv,
                .w = c->worker,
                .arena = &arena,
                .reply = &reply,
                .now = pcd_now_us(),
                .prefetch = 1};
  entry_vec ev = {0};
  snap_view snap = {0};
  page_order order = {0};
  const char *app = p->app && *p->app ? p->app : c->app;
  size_t limit = p->max_entries && p->max_entries < srv->config->max_hashes
                     ? p->max_entries
                     : srv->config->max_hashes;
  uint64_t bound = reply_bound(c), mono = pcache__mono_us();
  size_t at;
  int r;

  atomic_fetch_add(&srv->stats.gets, 1);
  if ((r = pcd_txn_begin(srv->store, 0, &s.txn)) < 0) {
    pcd_respond_error(c, r, NULL);
    return;
  }
  /*
   * Paging: offset counts entries of this order already handed out (sent
   * or dropped). A page touches nothing it sends, and the uses a client
   * reports are of blobs it was sent, which only move within the part
   * already handed out, so a page collected again goes on where the last
   * one stopped. Entries used or stored by others in between can shift
   * the order;
   * clients treat a page as a set of hashes. A connection's cursor keeps
   * the order of its last page instead, so the pages that follow neither
   * collect nor sort again (docs/protocol.md, Prefetch).
   */
  if (c->cursor && pcd_prefetch_cursor_continues(c->cursor, p->device_key.data, app, p->snapshot,
                                                 p->offset, mono)) {
    order.cursor = c->cursor;
    order.n = c->cursor->n;
    at = c->cursor->at;
  } else {
    pcd_prefetch_cursor_free(c->cursor);
    c->cursor = NULL;
    r = collect_order(&s, p, app, &snap, &ev);
    order.refs = ev.items;
    order.n = ev.n;
    at = p->offset;
  }
  if (r == 0)
    r = fill_page(&s, &order, p->device_key.data, limit, bound, &at);
  /* Entries past a shortened cursor are still to come. */
  if (r == 0 && order.cursor && at == order.n && !order.cursor->complete)
    reply.more = 1;
  if (r < 0 || arena.failed) {
    resp.status = r < 0 ? r : -ENOMEM;
  } else {
    resp.body_case = PCACHEPB__RESPONSE__BODY_PREFETCH;
    resp.prefetch = &reply;
  }
  /* What the next page goes on with: this cursor, a new one, or none. */
  if (resp.status == 0 && reply.more && !order.cursor) {
    keep_cursor(c, p, app, &ev, at, mono);
  } else if (resp.status == 0 && reply.more) {
    c->cursor->at = at;
  } else {
    pcd_prefetch_cursor_free(c->cursor);
    c->cursor = NULL;
  }
  if (c->cursor)
    c->cursor->next_offset = p->offset + reply.n_blobs + reply.dropped;
  log_debug("prefetch: app '%s': %zu blobs, snapshot of %zu hashes, %llu bytes", app, reply.n_blobs,
            reply.n_snapshot_hashes, (unsigned long long)s.bytes);
  finish_blobs(c, &s, &resp, p->window_taken);
  snap_view_free(&snap);
  size_t cap_bytes = ev.cap * sizeof *ev.items;
  pcache_vec_free(&ev);
  pcache__arena_free(&arena);
  pcd_server_trim(cap_bytes + reply.n_blobs * 128u);
}
