/* Hello and versioning, Put/Get/Prefetch round trips (inline and bulk via
 * a sealed memfd), List, Stats, Report, Purge, Verify on a real pcached. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

static void test_version_and_not_ready(test_env *env) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Hello h = PCACHEPB__HELLO__INIT;
  Pcachepb__Stats s = PCACHEPB__STATS__INIT;
  wire_reply rep;
  char want[64];
  int fd = test_raw_connect(env);
  ASSERT_GE(fd, 0);
  /* Anything before Hello is refused. */
  req.body_case = PCACHEPB__REQUEST__BODY_STATS;
  req.stats = &s;
  wire_call(fd, &req, &rep);
  ASSERT_ERR(rep.resp->status, PCACHE_ENOT_READY);
  wire_reply_free(&rep);
  /* A Hello of another version names both versions. */
  h.protocol_version = PCACHE_PROTOCOL_VERSION + 41;
  h.app = (char *)"old";
  req.body_case = PCACHEPB__REQUEST__BODY_HELLO;
  req.hello = &h;
  wire_call(fd, &req, &rep);
  ASSERT_ERR(rep.resp->status, PCACHE_EVERSION);
  snprintf(want, sizeof want, "%u", PCACHE_PROTOCOL_VERSION + 41);
  ASSERT_TRUE(strstr(rep.resp->message, want) != NULL);
  snprintf(want, sizeof want, "daemon speaks %u", PCACHE_PROTOCOL_VERSION);
  ASSERT_TRUE(strstr(rep.resp->message, want) != NULL);
  wire_reply_free(&rep);
  close(fd);
}

static void test_put_get(test_env *env) {
  pcache__devkey key;
  wire_item items[3];
  pcache__hash hashes[4];
  wire_reply rep;
  int fd = wire_open(env, "roundtrip");
  wire_devkey(1, &key);
  for (int i = 0; i < 3; i++) {
    wire_item_make(&items[i], &key, 100 + (uint64_t)i, 64 + 100 * (size_t)i);
    hashes[i] = items[i].hash;
  }
  wire_put(fd, &key, items, 3, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY_PUT);
  ASSERT_EQ(rep.resp->put->n_results, 3);
  ASSERT_EQ(rep.resp->put->stored, 3);
  for (int i = 0; i < 3; i++)
    ASSERT_EQ(rep.resp->put->results[i]->status, 0);
  wire_reply_free(&rep);

  memset(&hashes[3], 0xab, sizeof hashes[3]);
  wire_get(fd, &key, hashes, 4, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY_GET);
  ASSERT_EQ(rep.fd, -1); /* small: inline */
  ASSERT_EQ(rep.resp->get->n_blobs, 3);
  ASSERT_EQ(rep.resp->get->n_missing, 1);
  ASSERT_MEMEQ(rep.resp->get->missing[0].data, hashes[3].bytes, 16);
  for (int i = 0; i < 3; i++) {
    Pcachepb__Blob *b = rep.resp->get->blobs[i];
    ASSERT_MEMEQ(b->state_hash.data, hashes[i].bytes, 16);
    ASSERT_EQ(b->blob.len, items[i].item.blob.len);
    ASSERT_MEMEQ(b->blob.data, items[i].item.blob.data, b->blob.len);
    ASSERT_EQ(b->checksum, pcache__checksum64(b->blob.data, b->blob.len));
    ASSERT_EQ(b->kind, PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS);
  }
  wire_reply_free(&rep);
  for (int i = 0; i < 3; i++)
    wire_item_free(&items[i]);
  close(fd);
}

static void test_bulk_prefetch(test_env *env) {
  enum { N = 6 };
  pcache__devkey key;
  wire_item items[N];
  pcache__hash hashes[N];
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  wire_reply rep;
  int fd = wire_open(env, "bulky");
  wire_devkey(2, &key);
  for (int i = 0; i < N; i++) {
    wire_item_make(&items[i], &key, 200 + (uint64_t)i, 20000 + (size_t)i);
    hashes[i] = items[i].hash;
  }
  wire_put(fd, &key, items, N, &rep);
  ASSERT_EQ(rep.resp->put->stored, N);
  wire_reply_free(&rep);

  /* 120 KB of blobs: over the 64 KiB threshold, so a sealed memfd. */
  wire_get(fd, &key, hashes, N, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_GE(rep.fd, 0);
  ASSERT_EQ(rep.seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL),
            F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  ASSERT_EQ(rep.resp->get->n_blobs, N);
  for (int i = 0; i < N; i++) {
    size_t size;
    const uint8_t *data = wire_blob_data(&rep, rep.resp->get->blobs[i], &size);
    ASSERT_EQ(rep.resp->get->blobs[i]->blob.len, 0);
    ASSERT_EQ(size, items[i].item.blob.len);
    ASSERT_MEMEQ(data, items[i].item.blob.data, size);
  }
  wire_reply_free(&rep);

  /* Prefetch by the Hello app: every entry, most recent first. */
  pf.device_key.data = key.bytes;
  pf.device_key.len = 32;
  req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  req.prefetch = &pf;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY_PREFETCH);
  ASSERT_GE(rep.fd, 0);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, N);
  for (size_t i = 0; i < rep.resp->prefetch->n_blobs; i++) {
    size_t size;
    const uint8_t *data = wire_blob_data(&rep, rep.resp->prefetch->blobs[i], &size);
    ASSERT_EQ(pcache__checksum64(data, size), rep.resp->prefetch->blobs[i]->checksum);
  }
  wire_reply_free(&rep);

  /* Another app has nothing there; max_entries limits. */
  pf.app = (char *)"someone-else";
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, 0);
  wire_reply_free(&rep);
  pf.app = (char *)"bulky";
  pf.max_entries = 2;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, 2);
  ASSERT_EQ(rep.fd, -1);
  wire_reply_free(&rep);
  for (int i = 0; i < N; i++)
    wire_item_free(&items[i]);
  close(fd);
}

static void test_list_stats_report_purge_verify(test_env *env) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  Pcachepb__Report report = PCACHEPB__REPORT__INIT;
  Pcachepb__ReportItem ri[2] = {PCACHEPB__REPORT_ITEM__INIT, PCACHEPB__REPORT_ITEM__INIT};
  Pcachepb__ReportItem *rip[2] = {&ri[0], &ri[1]};
  Pcachepb__Purge purge = PCACHEPB__PURGE__INIT;
  Pcachepb__Verify verify = PCACHEPB__VERIFY__INIT;
  pcache__devkey key;
  wire_item items[2];
  wire_reply rep;
  int fd = wire_open(env, "lister");
  wire_devkey(3, &key);
  wire_item_make(&items[0], &key, 300, 100);
  wire_item_make(&items[1], &key, 301, 100);
  wire_put(fd, &key, items, 2, &rep);
  ASSERT_EQ(rep.resp->put->stored, 2);
  wire_reply_free(&rep);

  list.device_key.data = key.bytes;
  list.device_key.len = 32;
  list.entries = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_LIST;
  req.list = &list;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->list->n_devices, 1);
  ASSERT_EQ(rep.resp->list->devices[0]->entries, 2);
  ASSERT_STREQ(rep.resp->list->devices[0]->info->name, "test device");
  ASSERT_EQ(rep.resp->list->n_entries, 2);
  ASSERT_STREQ(rep.resp->list->entries[0]->app, "lister");
  ASSERT_EQ(rep.resp->list->entries[0]->blob_size, 100);
  wire_reply_free(&rep);

  /* NO_HIT is only counted; REJECTED drops the entry. */
  report.device_key.data = key.bytes;
  report.device_key.len = 32;
  ri[0].state_hash.data = items[0].hash.bytes;
  ri[0].state_hash.len = 16;
  ri[0].reason = PCACHEPB__REPORT_REASON__REPORT_REASON_NO_HIT;
  ri[1].state_hash.data = items[1].hash.bytes;
  ri[1].state_hash.len = 16;
  ri[1].reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
  report.items = rip;
  report.n_items = 2;
  req.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  req.report = &report;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->report->entries, 1);
  wire_reply_free(&rep);
  wire_get(fd, &key, &items[1].hash, 1, &rep);
  ASSERT_EQ(rep.resp->get->n_blobs, 0);
  wire_reply_free(&rep);
  wire_get(fd, &key, &items[0].hash, 1, &rep);
  ASSERT_EQ(rep.resp->get->n_blobs, 1);
  wire_reply_free(&rep);

  req.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
  req.verify = &verify;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_GE(rep.resp->verify->checked, 1);
  ASSERT_EQ(rep.resp->verify->n_problems, 0);
  wire_reply_free(&rep);

  wire_stats(fd, &rep);
  ASSERT_GE(rep.resp->stats->entries, 1);
  ASSERT_GE(rep.resp->stats->puts, 2);
  ASSERT_GE(rep.resp->stats->hits, 1);
  ASSERT_GE(rep.resp->stats->misses, 1);
  ASSERT_GE(rep.resp->stats->commits, 1);
  ASSERT_EQ(rep.resp->stats->reports, 2);
  ASSERT_GE(rep.resp->stats->devices, 1);
  ASSERT_EQ(rep.resp->stats->connections, 1);
  ASSERT_EQ(rep.resp->stats->protocol_version, PCACHE_PROTOCOL_VERSION);
  ASSERT_STREQ(rep.resp->stats->socket_path, env->socket_path);
  ASSERT_STREQ(rep.resp->stats->data_dir, env->data_dir);
  wire_reply_free(&rep);

  /* Purge by app, then everything. */
  purge.selector_case = PCACHEPB__PURGE__SELECTOR_APP;
  purge.app = (char *)"lister";
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = &purge;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->purge->entries, 1);
  ASSERT_GT(rep.resp->purge->bytes, 100);
  wire_reply_free(&rep);
  purge.selector_case = PCACHEPB__PURGE__SELECTOR_ALL;
  purge.all = 1;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->entries, 0);
  ASSERT_EQ(rep.resp->stats->bytes_used, 0);
  wire_reply_free(&rep);
  wire_item_free(&items[0]);
  wire_item_free(&items[1]);
  close(fd);
}

int main(void) {
  test_env env;
  test_env_init(&env, "roundtrip");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  test_version_and_not_ready(&env);
  test_put_get(&env);
  test_bulk_prefetch(&env);
  test_list_stats_report_purge_verify(&env);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
