/* Staged builds at the daemon (docs/replay.md "Staged builds"), without a
 * device to build on: a Put with stage set files each item under the
 * device's staged key (a description alone, or with a seed whose header
 * names the device), acknowledges one the device has already without
 * filing it, and refuses a seed of another device as a Put refuses a
 * blob; no request may name a staged key; Export leaves staged items out;
 * they count toward --max-size and are evicted like any entry; and a
 * pcached with replay off says HelloReply.stages false and refuses each
 * staged item with -EOPNOTSUPP.
 *
 * The keys are made up, so the replayer pcached starts for them finds no
 * device and exits: the staged entries stay, for the test to see. Their
 * builds are test_client_stage's (lavapipe). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

/* HelloReply.stages, on a fresh connection that is closed after. */
static int hello_stages(const test_env *env) {
  Pcachepb__HelloReply hello;
  int fd = test_open_hello(env, "stage", WIRE_TIMEOUT_MS, &hello);
  ASSERT_GE(fd, 0);
  close(fd);
  return hello.stages;
}

static void put_staged(int fd, const pcache__devkey *key, wire_item *items, size_t n,
                       wire_reply *ret) {
  wire_put_msg m;
  wire_put_msg_init(&m, key, "test device", items, n);
  m.put.stage = 1;
  wire_call(fd, &m.req, ret);
  wire_put_msg_free(&m);
}

/* Entries listed under key, and the blob size of the one with hash h
 * (-1: not there). */
static size_t count_under(int fd, const pcache__devkey *key, const pcache__hash *h,
                          long *ret_blob) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  wire_reply rep;
  size_t n = 0;
  list.entries = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_LIST;
  req.list = &list;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  if (ret_blob)
    *ret_blob = -1;
  for (size_t i = 0; i < rep.resp->list->n_entries; i++) {
    const Pcachepb__EntryRecord *e = rep.resp->list->entries[i];
    if (e->device_key.len != PCACHE_DEVKEY_SIZE ||
        memcmp(e->device_key.data, key->bytes, PCACHE_DEVKEY_SIZE) != 0)
      continue;
    n++;
    if (h && ret_blob && memcmp(e->state_hash.data, h->bytes, PCACHE_HASH_SIZE) == 0)
      *ret_blob = (long)e->blob_size;
  }
  wire_reply_free(&rep);
  return n;
}

/* Each item's status in a Put reply is want. */
static void expect_each(const wire_reply *rep, size_t n, int want) {
  ASSERT_EQ(rep->resp->status, 0);
  ASSERT_EQ(rep->resp->put->n_results, n);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(rep->resp->put->results[i]->status, want);
}

/* A request naming the staged key is refused whole, and says why. */
static void expect_refused(const wire_reply *rep) {
  ASSERT_EQ(rep->resp->status, PCACHE_EBAD_KEY);
  ASSERT_TRUE(rep->resp->message && strstr(rep->resp->message, "staged mark") != NULL);
}

static void refusals(int fd, const pcache__devkey *staged, wire_item *item) {
  wire_reply rep;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  wire_get(fd, staged, &item->hash, 1, &rep);
  expect_refused(&rep);
  wire_reply_free(&rep);
  wire_put(fd, staged, item, 1, &rep);
  expect_refused(&rep);
  wire_reply_free(&rep);
  put_staged(fd, staged, item, 1, &rep);
  expect_refused(&rep);
  wire_reply_free(&rep);
  pf.device_key.data = (uint8_t *)staged->bytes;
  pf.device_key.len = PCACHE_DEVKEY_SIZE;
  req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  req.prefetch = &pf;
  wire_call(fd, &req, &rep);
  expect_refused(&rep);
  wire_reply_free(&rep);
}

/* An Export of the whole store holds only the device's own entries. */
static void expect_export(int fd, uint64_t want) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Export ex = PCACHEPB__EXPORT__INIT;
  wire_reply rep;
  req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
  req.export = &ex;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->export->entries, want);
  wire_reply_free(&rep);
}

int main(void) {
  enum { N = 4, EVICT_N = 12, BLOB = 1000 };
  test_env env;
  pcache__devkey key, staged, other;
  wire_item items[N], built, seeded, foreign, many[EVICT_N];
  wire_reply rep;
  long blob;
  int fd;

  test_env_init(&env, "stage");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  ASSERT_EQ(hello_stages(&env), 1);
  fd = wire_open(&env, "stage");
  wire_devkey(7, &key);
  wire_devkey(8, &other);
  pcache__devkey_staged(&key, &staged);

  /* The device has one pipeline already, Put as usual. */
  wire_item_make(&built, &key, 99, BLOB);
  wire_put(fd, &key, &built, 1, &rep);
  expect_each(&rep, 1, 0);
  wire_reply_free(&rep);

  /* Descriptions alone: filed under the staged key, none under the
   * device's. */
  for (int i = 0; i < N; i++) {
    wire_item_make(&items[i], &key, 100 + (uint64_t)i, BLOB);
    free(items[i].item.blob.data);
    items[i].item.blob.data = NULL;
    items[i].item.blob.len = 0;
  }
  put_staged(fd, &key, items, N, &rep);
  expect_each(&rep, N, 0);
  ASSERT_EQ(rep.resp->put->stored, N);
  wire_reply_free(&rep);
  ASSERT_EQ(count_under(fd, &staged, &items[0].hash, &blob), N);
  ASSERT_EQ(blob, 0);
  ASSERT_EQ(count_under(fd, &key, NULL, NULL), 1);

  /* What the device has is acknowledged, and not filed: nothing to build. */
  put_staged(fd, &key, &built, 1, &rep);
  expect_each(&rep, 1, 0);
  wire_reply_free(&rep);
  ASSERT_EQ(count_under(fd, &staged, &built.hash, &blob), N);
  ASSERT_EQ(blob, -1);

  /* A seed is kept with its description; one of another device is
   * refused as a Put's blob is, and nothing is filed. */
  wire_item_make(&seeded, &key, 200, BLOB);
  put_staged(fd, &key, &seeded, 1, &rep);
  expect_each(&rep, 1, 0);
  wire_reply_free(&rep);
  ASSERT_EQ(count_under(fd, &staged, &seeded.hash, &blob), N + 1);
  ASSERT_EQ(blob, BLOB);
  wire_item_make(&foreign, &other, 201, BLOB);
  put_staged(fd, &key, &foreign, 1, &rep);
  ASSERT_EQ(rep.resp->put->stored, 0);
  ASSERT_TRUE(rep.resp->put->results[0]->status < 0);
  ASSERT_TRUE(rep.resp->put->results[0]->message && *rep.resp->put->results[0]->message);
  wire_reply_free(&rep);
  ASSERT_EQ(count_under(fd, &staged, NULL, NULL), N + 1);

  /* A staged item's description is checked as a Put's. */
  {
    wire_item bad;
    wire_item_make(&bad, &key, 300, 0);
    bad.item.desc.data[bad.item.desc.len / 2] ^= 0x5a;
    put_staged(fd, &key, &bad, 1, &rep);
    ASSERT_EQ(rep.resp->put->stored, 0);
    ASSERT_EQ(rep.resp->put->results[0]->status, PCACHE_EHASH_MISMATCH);
    wire_reply_free(&rep);
    wire_item_free(&bad);
  }

  refusals(fd, &staged, &items[0]);
  expect_export(fd, 1);

  /* Never served: a Get of the device's key finds the one Put, and none
   * of the staged. */
  wire_get(fd, &key, &items[0].hash, 1, &rep);
  ASSERT_EQ(rep.resp->get->n_blobs, 0);
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);

  /* --max-size: staged entries count and go oldest first. Room for about
   * six entries of ~1.2 KB (description, seed, index records). */
  {
    const char *args[] = {"--max-size", "9000", NULL};
    uint64_t evicted = 0;
    test_env_cleanup(&env);
    test_env_init(&env, "stage-evict");
    test_daemon_start(&env, args);
    fd = wire_open(&env, "stage");
    for (int i = 0; i < EVICT_N; i++) {
      wire_item_make(&many[i], &key, 400 + (uint64_t)i, BLOB);
      put_staged(fd, &key, &many[i], 1, &rep);
      expect_each(&rep, 1, 0);
      evicted += rep.resp->put->evicted;
      wire_reply_free(&rep);
      usleep(2000);
    }
    ASSERT_GE(evicted, 4);
    ASSERT_EQ(count_under(fd, &staged, &many[0].hash, &blob), EVICT_N - evicted);
    ASSERT_EQ(blob, -1); /* the oldest went */
    ASSERT_EQ(count_under(fd, &staged, &many[EVICT_N - 1].hash, &blob), EVICT_N - evicted);
    ASSERT_EQ(blob, BLOB);
    ASSERT_LE(wire_stats_of(fd).bytes_used, 9000);
    close(fd);
    ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  }

  /* Replay off: no stages, and each staged item refused; nothing filed. */
  setenv("PCACHE_REPLAY", "off", 1);
  test_daemon_start(&env, NULL);
  ASSERT_EQ(hello_stages(&env), 0);
  fd = wire_open(&env, "stage");
  {
    size_t before = count_under(fd, &staged, NULL, NULL);
    put_staged(fd, &key, items, N, &rep);
    expect_each(&rep, N, -EOPNOTSUPP);
    ASSERT_EQ(rep.resp->put->stored, 0);
    ASSERT_TRUE(strstr(rep.resp->put->results[0]->message, "HelloReply.stages") != NULL);
    wire_reply_free(&rep);
    ASSERT_EQ(count_under(fd, &staged, NULL, NULL), before);
  }
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  unsetenv("PCACHE_REPLAY");

  /* A replayer that is not there: the same. */
  setenv("PCACHE_REPLAYER", "/nonexistent/pcache-replay", 1);
  test_daemon_start(&env, NULL);
  ASSERT_EQ(hello_stages(&env), 0);
  fd = wire_open(&env, "stage");
  put_staged(fd, &key, items, 1, &rep);
  expect_each(&rep, 1, -EOPNOTSUPP);
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  unsetenv("PCACHE_REPLAYER");

  for (int i = 0; i < N; i++)
    wire_item_free(&items[i]);
  for (int i = 0; i < EVICT_N; i++)
    wire_item_free(&many[i]);
  wire_item_free(&built);
  wire_item_free(&seeded);
  wire_item_free(&foreign);
  test_env_cleanup(&env);
  return 0;
}
