/* Prefetch sends what an app is likely to use (issue 15, point 7): of
 * 5,000 variants last used two months before the app's latest run and 50
 * used in it, the 50. The rest are still served per miss (Get), which
 * brings them back; a blob a Prefetch sent is not a hit until the client
 * reports building from it (Report.used, point 8), and then it is one at
 * once, with its last use. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/alloc.h"
#include "common/blob.h"
#include "proto/archive.h"
#include "test.h"
#include "wire.h"

enum { STALE = 5000, RECENT = 50, N = STALE + RECENT };

static wire_item items[N];

static void import_all(int fd, const pcache__devkey *key, uint64_t now_s) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import im = PCACHEPB__IMPORT__INIT;
  pcache__archive_writer *w;
  pcache__archive_entry e;
  uint8_t *data;
  size_t size;
  wire_reply rep;
  ASSERT_OK(pcache__archive_writer_new(&w));
  ASSERT_OK(pcache__archive_add_module(w, &items[0].module_hash, items[0].module.code.data,
                                       items[0].module.code.len));
  for (int i = 0; i < N; i++) {
    memset(&e, 0, sizeof e);
    e.device_key = *key;
    e.state_hash = items[i].hash;
    e.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS;
    e.app = "vkcube";
    e.blob = items[i].item.blob.data;
    e.blob_size = items[i].item.blob.len;
    e.checksum = pcache__checksum64(e.blob, e.blob_size);
    e.desc = items[i].item.desc.data;
    e.desc_size = items[i].item.desc.len;
    /* The stale ones: last used 60 days before the app's last run. */
    e.created = now_s - 90 * 86400;
    e.last_used = i < STALE ? now_s - 61 * 86400 - (uint64_t)i : now_s - 86400;
    ASSERT_OK(pcache__archive_add_entry(w, &e));
  }
  ASSERT_OK(pcache__archive_finish(w, &data, &size));
  pcache__archive_writer_free(w);
  im.archive.data = data;
  im.archive.len = size;
  req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  req.import = &im;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->import->accepted, N);
  wire_reply_free(&rep);
  pcache__free(data);
}

/* The index of the item with this state hash. */
static int item_of(const uint8_t *hash) {
  for (int i = 0; i < N; i++)
    if (memcmp(items[i].hash.bytes, hash, 16) == 0)
      return i;
  return -1;
}

/* Every page of one Prefetch; returns how many blobs, and how many of
 * them were stale ones in *ret_stale. */
static int prefetch_all(int fd, const pcache__devkey *key, int *ret_stale) {
  uint32_t offset = 0;
  int n = 0, more = 1;
  *ret_stale = 0;
  while (more) {
    wire_reply rep;
    const Pcachepb__GetReply *g;
    wire_prefetch(fd, key, 0, offset, 0, &rep);
    g = rep.resp->prefetch;
    for (size_t i = 0; i < g->n_blobs; i++) {
      int at = item_of(g->blobs[i]->state_hash.data);
      ASSERT_TRUE(at >= 0);
      *ret_stale += at < STALE;
    }
    n += (int)g->n_blobs;
    offset += (uint32_t)(g->n_blobs + g->dropped);
    more = g->more;
    wire_reply_free(&rep);
  }
  return n;
}

/* Report.used for one entry (a write: pending Get touches go first). */
static void report_used(int fd, const pcache__devkey *key, const pcache__hash *h) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Report rp = PCACHEPB__REPORT__INIT;
  ProtobufCBinaryData used = {.len = 16, .data = (uint8_t *)h->bytes};
  wire_reply rep;
  rp.device_key.data = (uint8_t *)key->bytes;
  rp.device_key.len = 32;
  rp.used = &used;
  rp.n_used = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  req.report = &rp;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
}

/* The listed hits of the entry with this hash. */
static uint64_t hits_of(int fd, const pcache__hash *h) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  wire_reply rep;
  uint64_t hits = UINT64_MAX;
  list.entries = 1;
  list.app = "vkcube";
  req.body_case = PCACHEPB__REQUEST__BODY_LIST;
  req.list = &list;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  for (size_t i = 0; i < rep.resp->list->n_entries; i++)
    if (memcmp(rep.resp->list->entries[i]->state_hash.data, h->bytes, 16) == 0)
      hits = rep.resp->list->entries[i]->hits;
  wire_reply_free(&rep);
  return hits;
}

int main(void) {
  test_env env;
  pcache__devkey key;
  wire_reply rep;
  int fd, stale, n;
  uint64_t now_s = (uint64_t)time(NULL);

  test_env_init(&env, "prefetch-recent");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "vkcube");
  wire_devkey(21, &key);
  for (int i = 0; i < N; i++)
    wire_item_make(&items[i], &key, 7000 + (uint64_t)i, 64);
  import_all(fd, &key, now_s);

  /* The 50 of the last run, none of the 5,000. Twice: sending them is not
   * using them, so the order and the cut stay. */
  ASSERT_EQ(prefetch_all(fd, &key, &stale), RECENT);
  ASSERT_EQ(stale, 0);
  ASSERT_EQ(prefetch_all(fd, &key, &stale), RECENT);
  ASSERT_EQ(hits_of(fd, &items[STALE].hash), 0);

  /* A stale one is still there for a miss, and the Get is a use. */
  wire_get(fd, &key, &items[7].hash, 1, &rep);
  ASSERT_EQ(rep.resp->get->n_blobs, 1);
  wire_reply_free(&rep);
  /* A client reports building from a prefetched one: its hit, at once. */
  report_used(fd, &key, &items[STALE + 3].hash);
  ASSERT_EQ(hits_of(fd, &items[STALE + 3].hash), 1);
  ASSERT_EQ(hits_of(fd, &items[STALE + 4].hash), 0);
  /* The Get's touch went in before the report: the stale one is back. */
  ASSERT_EQ(hits_of(fd, &items[7].hash), 1);
  n = prefetch_all(fd, &key, &stale);
  ASSERT_EQ(stale, 1);
  ASSERT_EQ(n, RECENT + 1);

  for (int i = 0; i < N; i++)
    wire_item_free(&items[i]);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
