/* Prefetch paging on a real pcached: 5000+ entries come back over several
 * pages (max_entries, or the daemon's max_hashes), each exactly once, with
 * `more` set while entries remain, even when the hits of earlier pages are
 * written between pages (which reorders entries by last use). Blob bytes of
 * every page are checked against what was put. */
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
      const Pcachepb__Blob *b = g->blobs[i];
      expect *e = find(ex, b->state_hash.data);
      size_t size;
      const uint8_t *data = wire_blob_data(&rep, b, &size);
      ASSERT_TRUE(e != NULL);
      ASSERT_EQ(e->seen, 0);
      e->seen = 1;
      ASSERT_TRUE(data != NULL);
      ASSERT_EQ(size, e->size);
      ASSERT_EQ(b->checksum, e->checksum);
      ASSERT_EQ(pcache__checksum64(data, size), e->checksum);
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

int main(void) {
  static const char *const args[] = {"--max-hashes", "1024", NULL};
  static expect ex[N];
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  pcache__devkey key;
  wire_reply rep;
  test_env env;
  int fd;

  test_env_init(&env, "prefetch");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "pager");
  wire_devkey(7, &key);
  fill(fd, &key, ex);

  /* The daemon's own limit (max_hashes) pages: 1024 a page. */
  ASSERT_EQ(page_all(fd, &key, ex, 0, 0), (N + MAX_HASHES - 1) / MAX_HASHES);
  /* Smaller pages, with every page's hits written before the next page
   * (entries it sent become the most recent ones). */
  ASSERT_EQ(page_all(fd, &key, ex, 700, 1), (N + 699) / 700);
  ASSERT_EQ(page_all(fd, &key, ex, 333, 0), (N + 332) / 333);

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

  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
