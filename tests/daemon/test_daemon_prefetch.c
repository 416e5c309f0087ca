/* Prefetch paging on a real pcached: 5000+ entries come back over several
 * pages (max_entries, or the daemon's max_hashes), each exactly once, with
 * `more` set while entries remain, even when the hits of earlier pages are
 * written between pages (which reorders entries by last use). Blob bytes of
 * every page are checked against what was put.
 *
 * The pages after the first go on with the connection's cursor: one
 * collection of the app's entries for all of them (Stats.prefetch_scans),
 * also when entries are purged, replaced or added between pages, and two
 * for an order longer than a cursor keeps. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

enum { N = 5200, BATCH = 400, MAX_HASHES = 1024 };

typedef struct expect {
  pcache__hash hash;
  uint64_t checksum;
  size_t size;
  int seen;
  uint64_t salt; /* wire_item_make's */
  int gone;      /* purged */
} expect;

static int by_hash(const void *a, const void *b) {
  return memcmp(((const expect *)a)->hash.bytes, ((const expect *)b)->hash.bytes, 16);
}

static expect *find(expect *ex, const uint8_t *hash) {
  expect k;
  memcpy(k.hash.bytes, hash, 16);
  return bsearch(&k, ex, N, sizeof *ex, by_hash);
}

/* A write request: the daemon writes the pending hits before it, so the
 * reorder a page's touches cause is on disk when the reply comes. */
static void flush_touches(int fd, const pcache__devkey *key) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Report rp = PCACHEPB__REPORT__INIT;
  Pcachepb__ReportItem it = PCACHEPB__REPORT_ITEM__INIT;
  Pcachepb__ReportItem *items[1] = {&it};
  uint8_t none[16];
  wire_reply rep;
  memset(none, 0xee, sizeof none);
  it.state_hash.data = none;
  it.state_hash.len = 16;
  it.reason = PCACHEPB__REPORT_REASON__REPORT_REASON_NO_HIT;
  rp.device_key.data = (uint8_t *)key->bytes;
  rp.device_key.len = 32;
  rp.n_items = 1;
  rp.items = items;
  req.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  req.report = &rp;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
}

static void fill(int fd, const pcache__devkey *key, expect *ex) {
  for (size_t base = 0; base < N; base += BATCH) {
    wire_item items[BATCH];
    wire_reply rep;
    size_t n = N - base < BATCH ? N - base : BATCH;
    for (size_t i = 0; i < n; i++) {
      /* Sizes vary so that offsets in the memfd are not all aligned. */
      wire_item_make(&items[i], key, 1000 + base + i, 40 + (base + i) % 97);
      ex[base + i].hash = items[i].hash;
      ex[base + i].salt = 1000 + base + i;
      ex[base + i].size = items[i].item.blob.len;
      ex[base + i].checksum = pcache__checksum64(items[i].item.blob.data, items[i].item.blob.len);
    }
    wire_put(fd, key, items, n, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->put->stored, n);
    wire_reply_free(&rep);
    for (size_t i = 0; i < n; i++)
      wire_item_free(&items[i]);
  }
  qsort(ex, N, sizeof *ex, by_hash);
}

/* A blob a page sent for e: e's bytes, and e not seen before. */
static void take_blob(expect *e, const wire_reply *rep, const Pcachepb__Blob *b) {
  size_t size;
  const uint8_t *data = wire_blob_data(rep, b, &size);
  ASSERT_EQ(e->seen, 0);
  e->seen = 1;
  ASSERT_TRUE(data != NULL);
  ASSERT_EQ(size, e->size);
  ASSERT_EQ(b->checksum, e->checksum);
  ASSERT_EQ(pcache__checksum64(data, size), e->checksum);
}

/* Pages through every entry; returns the number of pages. */
static unsigned page_all(int fd, const pcache__devkey *key, expect *ex, uint32_t max_entries,
                         int flush_between) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  uint32_t per_page = max_entries ? max_entries : MAX_HASHES;
  unsigned pages = 0;
  size_t total = 0;
  int more = 1;
  for (size_t i = 0; i < N; i++)
    ex[i].seen = 0;
  pf.device_key.data = (uint8_t *)key->bytes;
  pf.device_key.len = 32;
  pf.max_entries = max_entries;
  req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  req.prefetch = &pf;
  while (more) {
    const Pcachepb__GetReply *g;
    wire_reply rep;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY_PREFETCH);
    g = rep.resp->prefetch;
    ASSERT_EQ(g->dropped, 0);
    ASSERT_LE(g->n_blobs, per_page);
    more = g->more;
    /* Full pages while entries remain, the rest on the last one. */
    ASSERT_EQ(g->n_blobs, N - total < per_page ? N - total : per_page);
    ASSERT_EQ(more, total + g->n_blobs < N);
    for (size_t i = 0; i < g->n_blobs; i++) {
      expect *e = find(ex, g->blobs[i]->state_hash.data);
      ASSERT_TRUE(e != NULL);
      take_blob(e, &rep, g->blobs[i]);
    }
    total += g->n_blobs;
    pf.offset += (uint32_t)(g->n_blobs + g->dropped);
    pages++;
    wire_reply_free(&rep);
    ASSERT_LE(pages, N);
    if (flush_between)
      flush_touches(fd, key);
  }
  ASSERT_EQ(total, N);
  for (size_t i = 0; i < N; i++)
    ASSERT_EQ(ex[i].seen, 1);
  return pages;
}

static uint64_t scans(int fd) { return wire_stats_of(fd).prefetch_scans; }

static void purge_hash(int fd, const pcache__hash *h) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Purge pg = PCACHEPB__PURGE__INIT;
  wire_reply rep;
  pg.selector_case = PCACHEPB__PURGE__SELECTOR_STATE_HASH;
  pg.state_hash.data = (uint8_t *)h->bytes;
  pg.state_hash.len = 16;
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = &pg;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->purge->entries, 1);
  wire_reply_free(&rep);
}

/* Puts one item for each of n salts with blobs of size bytes. */
static void put_salts(int fd, const pcache__devkey *key, const uint64_t *salts, size_t n,
                      size_t size) {
  wire_item items[16];
  wire_reply rep;
  ASSERT_LE(n, 16);
  for (size_t i = 0; i < n; i++)
    wire_item_make(&items[i], key, salts[i], size);
  wire_put(fd, key, items, n, &rep);
  ASSERT_EQ(rep.resp->put->stored, n);
  wire_reply_free(&rep);
  for (size_t i = 0; i < n; i++)
    wire_item_free(&items[i]);
}

/* After the first page, 10 entries it did not send are purged, 10 are
 * replaced by larger blobs and 8 new ones are stored. The cursor reads
 * each entry again when a page sends it: a purged one is neither sent
 * nor dropped, a replaced one comes with its new blob (no checksum
 * failure, nothing dropped), a new one at most once, every other once. */
static void changes_between_pages(int fd, const pcache__devkey *key, expect *ex) {
  enum { PAGE = 500 };
  uint64_t salts[16], s0 = scans(fd), failures = wire_stats_of(fd).checksum_failures;
  uint32_t offset = 0;
  size_t purged = 0, replaced = 0, added = 0;
  int more = 1;
  for (size_t i = 0; i < N; i++)
    ex[i].seen = ex[i].gone = 0;
  for (unsigned page = 0; more; page++) {
    wire_reply rep;
    const Pcachepb__GetReply *g;
    wire_prefetch(fd, key, PAGE, offset, 0, &rep);
    g = rep.resp->prefetch;
    ASSERT_EQ(g->dropped, 0);
    for (size_t i = 0; i < g->n_blobs; i++) {
      expect *e = find(ex, g->blobs[i]->state_hash.data);
      if (!e) { /* one of the new ones */
        ASSERT_EQ(g->blobs[i]->blob_size + g->blobs[i]->blob.len, 333);
        added++;
        continue;
      }
      ASSERT_EQ(e->gone, 0);
      take_blob(e, &rep, g->blobs[i]);
    }
    more = g->more;
    offset += (uint32_t)(g->n_blobs + g->dropped);
    wire_reply_free(&rep);
    if (page != 0)
      continue;
    for (size_t i = 0; i < N && purged + replaced < 20; i++) {
      if (ex[i].seen)
        continue;
      if (purged < 10) {
        purge_hash(fd, &ex[i].hash);
        ex[i].gone = 1;
        purged++;
        continue;
      }
      wire_item it;
      wire_item_make(&it, key, ex[i].salt, 4000);
      ex[i].size = 4000;
      ex[i].checksum = pcache__checksum64(it.item.blob.data, it.item.blob.len);
      wire_item_free(&it);
      salts[replaced++] = ex[i].salt;
    }
    put_salts(fd, key, salts, replaced, 4000);
    for (size_t i = 0; i < 8; i++)
      salts[i] = 900000 + i;
    put_salts(fd, key, salts, 8, 333);
  }
  for (size_t i = 0; i < N; i++)
    ASSERT_EQ(ex[i].seen, !ex[i].gone);
  ASSERT_LE(added, 8);
  fprintf(stderr, "changes between pages: %zu purged, %zu replaced, %zu of 8 new ones sent\n",
          purged, replaced, added);
  ASSERT_EQ(scans(fd) - s0, 1);
  ASSERT_EQ(wire_stats_of(fd).checksum_failures, failures);
}

static int by_bytes(const void *a, const void *b) { return memcmp(a, b, 16); }

/* More entries left after the first page than a cursor keeps
 * (PCD_CURSOR_MAX_HASHES, 16384): the page after its end collects once
 * more; every entry comes once. */
static void longer_than_a_cursor(const test_env *env, const pcache__devkey *key) {
  enum { MANY = MAX_HASHES + 16384 + 600 };
  int fd = wire_open(env, "many");
  pcache__hash *hashes = calloc(MANY, sizeof *hashes);
  uint8_t *seen = calloc(MANY, 1);
  uint64_t s0;
  uint32_t offset = 0;
  size_t got = 0;
  int more = 1;
  for (size_t base = 0; base < MANY; base += BATCH) {
    wire_item items[BATCH];
    wire_reply rep;
    size_t n = MANY - base < BATCH ? MANY - base : BATCH;
    for (size_t i = 0; i < n; i++) {
      wire_item_make(&items[i], key, 2000000 + base + i, 40);
      hashes[base + i] = items[i].hash;
    }
    wire_put(fd, key, items, n, &rep);
    ASSERT_EQ(rep.resp->put->stored, n);
    wire_reply_free(&rep);
    for (size_t i = 0; i < n; i++)
      wire_item_free(&items[i]);
  }
  qsort(hashes, MANY, sizeof *hashes, by_bytes);
  s0 = scans(fd);
  while (more) {
    wire_reply rep;
    const Pcachepb__GetReply *g;
    wire_prefetch(fd, key, 0, offset, 0, &rep);
    g = rep.resp->prefetch;
    for (size_t i = 0; i < g->n_blobs; i++) {
      pcache__hash *h =
          bsearch(g->blobs[i]->state_hash.data, hashes, MANY, sizeof *hashes, by_bytes);
      ASSERT_TRUE(h != NULL);
      ASSERT_EQ(seen[h - hashes], 0);
      seen[h - hashes] = 1;
    }
    got += g->n_blobs;
    more = g->more;
    offset += (uint32_t)(g->n_blobs + g->dropped);
    wire_reply_free(&rep);
  }
  ASSERT_EQ(got, MANY);
  ASSERT_EQ(scans(fd) - s0, 2);
  free(seen);
  free(hashes);
  close(fd);
}

int main(void) {
  static const char *const args[] = {"--max-hashes", "1024", NULL};
  static expect ex[N];
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  pcache__devkey key;
  wire_reply rep;
  test_env env;
  uint64_t s0;
  int fd, other;

  test_env_init(&env, "prefetch");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "pager");
  wire_devkey(7, &key);
  fill(fd, &key, ex);

  /* The daemon's own limit (max_hashes) pages: 1024 a page. */
  s0 = scans(fd);
  ASSERT_EQ(page_all(fd, &key, ex, 0, 0), (N + MAX_HASHES - 1) / MAX_HASHES);
  ASSERT_EQ(scans(fd) - s0, 1);
  /* Smaller pages, with every page's hits written before the next page
   * (entries it sent become the most recent ones). */
  ASSERT_EQ(page_all(fd, &key, ex, 700, 1), (N + 699) / 700);
  ASSERT_EQ(scans(fd) - s0, 2);
  ASSERT_EQ(page_all(fd, &key, ex, 333, 0), (N + 332) / 333);
  ASSERT_EQ(scans(fd) - s0, 3);

  /* Another connection going on from an offset has no cursor there: it
   * collects, and its next page goes on with its own cursor. */
  other = wire_open(&env, "pager");
  wire_prefetch(other, &key, 333, 333, 0, &rep);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, 333);
  wire_reply_free(&rep);
  wire_prefetch(other, &key, 333, 666, 0, &rep);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, 333);
  wire_reply_free(&rep);
  ASSERT_EQ(scans(fd) - s0, 4);
  close(other);

  /* An offset at or past the end: nothing, and no more. */
  pf.device_key.data = key.bytes;
  pf.device_key.len = 32;
  pf.offset = N;
  req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  req.prefetch = &pf;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, 0);
  ASSERT_EQ(rep.resp->prefetch->more, 0);
  wire_reply_free(&rep);
  /* The last entry alone. */
  pf.offset = N - 1;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, 1);
  ASSERT_EQ(rep.resp->prefetch->more, 0);
  wire_reply_free(&rep);

  changes_between_pages(fd, &key, ex);
  longer_than_a_cursor(&env, &key);

  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
