/* The size counters never drift from the records they count
 * (docs/storage.md "Databases"): a random mix of the requests that change
 * them (Puts that add, replace and refile entries under another app, Gets
 * whose hits are written back, Reports that drop entries and snapshots,
 * Purges of each kind, PutSnapshots that replace, Imports of entries
 * already stored, and the evictions a small --max-size forces) on two
 * devices, then:
 *   - `verify` finds no problem (it sums every counter's records);
 *   - with the daemon stopped, each counter in `info` equals the sum this
 *     test makes itself from the LMDB records, and each device record's
 *     entry and byte counts its entries';
 *   - a counter changed by hand is reported by verify and set right by
 *     verify --repair.
 * PCACHE_REL_COUNTER_OPS (default 1500) and PCACHE_REL_SEED set the mix. */
#include <lmdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "proto/archive.h"
#include "rel_util.h"
#include "test.h"

#define SALTS 48 /* few, so that Puts replace and Purges find entries */

static test_env env;
static pcache__devkey keys[2];
static const char *const apps[] = {"app-a", "app-bb", "app-ccc-long-name"};
static unsigned rng;

static unsigned rnd(unsigned n) {
  rng = rng * 1103515245u + 12345u;
  return (rng >> 8) % n;
}

static void call(int fd, Pcachepb__Request *req) {
  wire_reply rep;
  wire_call(fd, req, &rep);
  wire_reply_free(&rep);
}

static void op_put(int fd, const pcache__devkey *key) {
  wire_item items[3];
  size_t n = 1 + rnd(3);
  wire_reply rep;
  for (size_t i = 0; i < n; i++)
    wire_item_make(&items[i], key, 1 + rnd(SALTS), 64 + rnd(6000));
  /* One pipeline twice in one Put, the second time smaller: LMDB
   * overwrites the first's overflow pages in place. */
  if (n == 3 && rnd(2)) {
    wire_item_free(&items[1]);
    wire_item_free(&items[2]);
    wire_item_make(&items[1], key, 100, 9000);
    wire_item_make(&items[2], key, 100, 3000);
  }
  wire_put(fd, key, items, n, &rep);
  wire_reply_free(&rep);
  for (size_t i = 0; i < n; i++)
    wire_item_free(&items[i]);
}

/* The state hash wire_item_make gives salt. */
static void hash_of(const pcache__devkey *key, uint64_t salt, pcache__hash *ret) {
  wire_item it;
  wire_item_make(&it, key, salt, 64);
  *ret = it.hash;
  wire_item_free(&it);
}

static void op_get(int fd, const pcache__devkey *key) {
  pcache__hash h[4];
  wire_reply rep;
  for (int i = 0; i < 4; i++)
    hash_of(key, 1 + rnd(SALTS), &h[i]);
  wire_get(fd, key, h, 4, &rep);
  wire_reply_free(&rep);
}

static void op_report(int fd, const pcache__devkey *key) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Report rep = PCACHEPB__REPORT__INIT;
  Pcachepb__ReportItem item = PCACHEPB__REPORT_ITEM__INIT, *items[1] = {&item};
  ProtobufCBinaryData used;
  pcache__hash h, u;
  hash_of(key, 1 + rnd(SALTS), &h);
  hash_of(key, 1 + rnd(SALTS), &u);
  rep.device_key.data = (uint8_t *)key->bytes;
  rep.device_key.len = PCACHE_DEVKEY_SIZE;
  item.state_hash.data = h.bytes;
  item.state_hash.len = PCACHE_HASH_SIZE;
  item.reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
  rep.items = items;
  rep.n_items = 1;
  used.data = u.bytes;
  used.len = PCACHE_HASH_SIZE;
  rep.used = &used;
  rep.n_used = 1;
  if (rnd(2))
    rep.snapshot = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
  req.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  req.report = &rep;
  call(fd, &req);
}

static void op_purge(int fd, const pcache__devkey *key) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Purge p = PCACHEPB__PURGE__INIT;
  pcache__hash h;
  switch (rnd(8)) {
  case 0:
    p.selector_case = PCACHEPB__PURGE__SELECTOR_APP;
    p.app = (char *)apps[rnd(3)];
    break;
  case 1:
    p.selector_case = PCACHEPB__PURGE__SELECTOR_OLDER_THAN_S;
    p.older_than_s = 0;
    break;
  case 2:
    p.selector_case = PCACHEPB__PURGE__SELECTOR_DEVICE_KEY;
    p.device_key.data = (uint8_t *)key->bytes;
    p.device_key.len = PCACHE_DEVKEY_SIZE;
    break;
  default:
    hash_of(key, 1 + rnd(SALTS), &h);
    p.selector_case = PCACHEPB__PURGE__SELECTOR_STATE_HASH;
    p.state_hash.data = h.bytes;
    p.state_hash.len = PCACHE_HASH_SIZE;
    break;
  }
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = &p;
  call(fd, &req);
}

static void op_snapshot(int fd, const pcache__devkey *key, const char *app) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__PutSnapshot ps = PCACHEPB__PUT_SNAPSHOT__INIT;
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  ProtobufCBinaryData hashes[3];
  pcache__hash h[3];
  size_t size = 256 + rnd(8000);
  uint8_t *blob = wire_blob(key, size, (uint8_t)rnd(256));
  for (int i = 0; i < 3; i++) {
    hash_of(key, 1 + rnd(SALTS), &h[i]);
    hashes[i].data = h[i].bytes;
    hashes[i].len = PCACHE_HASH_SIZE;
  }
  dev.key.data = (uint8_t *)key->bytes;
  dev.key.len = PCACHE_DEVKEY_SIZE;
  dev.name = (char *)"counter-gpu";
  ps.device = &dev;
  ps.app = (char *)app;
  ps.blob.data = blob;
  ps.blob.len = size;
  ps.state_hashes = hashes;
  ps.n_state_hashes = 1 + rnd(3);
  req.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
  req.put_snapshot = &ps;
  call(fd, &req);
  free(blob);
}

/* An archive of entries of which some are stored already (the same
 * salts): Import must count only what it adds or replaces. */
static void op_import(int fd, const pcache__devkey *key) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import imp = PCACHEPB__IMPORT__INIT;
  pcache__archive_writer *w;
  pcache__hash module;
  size_t size;
  uint8_t *data, code[16] = {0x03, 0x02, 0x23, 0x07, 0, 0, 1, 0, 'i', 'm', 'p'};
  pcache__hash128(code, sizeof code, &module);
  ASSERT_OK(pcache__archive_writer_new(&w));
  ASSERT_OK(pcache__archive_add_module(w, &module, code, sizeof code));
  for (int i = 0; i < 3; i++) {
    size_t blob_size = 64 + rnd(4000);
    uint8_t *blob = wire_blob(key, blob_size, (uint8_t)i);
    rel_archive_entry(w, key, 1000 + rnd(SALTS / 4), blob, blob_size, &module);
    free(blob);
  }
  ASSERT_OK(pcache__archive_finish(w, &data, &size));
  pcache__archive_writer_free(w);
  imp.archive.data = data;
  imp.archive.len = size;
  req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  req.import = &imp;
  call(fd, &req);
  free(data);
}

static uint64_t sum_db(MDB_txn *txn, const char *name, int with_keys, int with_values) {
  MDB_dbi dbi;
  MDB_cursor *cur;
  MDB_val k, v;
  uint64_t n = 0;
  ASSERT_EQ(mdb_dbi_open(txn, name, 0, &dbi), 0);
  ASSERT_EQ(mdb_cursor_open(txn, dbi, &cur), 0);
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
    n += (with_keys ? k.mv_size : 0) + (with_values ? v.mv_size : 0);
  mdb_cursor_close(cur);
  return n;
}

static uint64_t counter(MDB_txn *txn, const char *name) {
  MDB_dbi dbi;
  MDB_val k = {strlen(name), (void *)name}, v;
  uint64_t x = 0;
  ASSERT_EQ(mdb_dbi_open(txn, "info", 0, &dbi), 0);
  ASSERT_EQ(mdb_get(txn, dbi, &k, &v), 0);
  ASSERT_EQ(v.mv_size, 8);
  memcpy(&x, v.mv_data, 8); /* little-endian, as the machines the suite runs on */
  return x;
}

/* Each device record's entry and byte counts (what list shows) against
 * its entries: v1 metadata's blob and description sizes at bytes 8, 16. */
static void check_device_records(MDB_txn *txn) {
  MDB_dbi entries, devices;
  MDB_cursor *cur;
  MDB_val k, v;
  uint64_t n[2] = {0}, bytes[2] = {0};
  ASSERT_EQ(mdb_dbi_open(txn, "entries", 0, &entries), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "devices", 0, &devices), 0);
  ASSERT_EQ(mdb_cursor_open(txn, entries, &cur), 0);
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
    int d = memcmp(k.mv_data, keys[1].bytes, PCACHE_DEVKEY_SIZE) == 0;
    uint64_t blob, desc;
    memcpy(&blob, (const uint8_t *)v.mv_data + 8, 8);
    memcpy(&desc, (const uint8_t *)v.mv_data + 16, 8);
    n[d]++;
    bytes[d] += blob + desc;
  }
  mdb_cursor_close(cur);
  for (int d = 0; d < 2; d++) {
    uint64_t rec_n, rec_bytes;
    k.mv_size = PCACHE_DEVKEY_SIZE;
    k.mv_data = keys[d].bytes;
    if (mdb_get(txn, devices, &k, &v) != 0) {
      ASSERT_EQ(n[d], 0);
      continue;
    }
    memcpy(&rec_n, (const uint8_t *)v.mv_data + 24, 8);
    memcpy(&rec_bytes, (const uint8_t *)v.mv_data + 32, 8);
    ASSERT_EQ(rec_n, n[d]);
    ASSERT_EQ(rec_bytes, bytes[d]);
  }
}

/* Each counter against the records, read by this test from data.mdb. */
static void check_counters_on_disk(uint64_t stats_bytes_used, uint64_t stats_snapshot_bytes) {
  MDB_env *menv;
  MDB_txn *txn;
  uint64_t bytes, modules, devices, index, snaps;
  ASSERT_EQ(mdb_env_create(&menv), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(menv, 16), 0);
  ASSERT_EQ(mdb_env_open(menv, env.data_dir, MDB_RDONLY, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(menv, NULL, MDB_RDONLY, &txn), 0);
  bytes = sum_db(txn, "blobs", 0, 1) + sum_db(txn, "descs", 0, 1);
  modules = sum_db(txn, "modules", 1, 1);
  devices = sum_db(txn, "devices", 1, 1);
  index = sum_db(txn, "entries", 1, 1) + sum_db(txn, "lru", 1, 1) + sum_db(txn, "apps", 1, 1) +
          sum_db(txn, "snapshots", 1, 1) + sum_db(txn, "snapshots", 1, 0);
  snaps = sum_db(txn, "snapdata", 0, 1);
  printf("records: entries %llu, modules %llu, devices %llu, index %llu, snapshots %llu\n",
         (unsigned long long)bytes, (unsigned long long)modules, (unsigned long long)devices,
         (unsigned long long)index, (unsigned long long)snaps);
  ASSERT_EQ(counter(txn, "bytes"), bytes);
  ASSERT_EQ(counter(txn, "module_bytes"), modules);
  ASSERT_EQ(counter(txn, "device_bytes"), devices);
  ASSERT_EQ(counter(txn, "index_bytes"), index);
  ASSERT_EQ(counter(txn, "snap_bytes"), snaps);
  /* And Stats said the same before the stop. */
  ASSERT_EQ(stats_bytes_used, bytes + modules + devices + index);
  ASSERT_EQ(stats_snapshot_bytes, snaps);
  check_device_records(txn);
  mdb_txn_abort(txn);
  mdb_env_close(menv);
}

/* Adds delta to counter name in data.mdb (the daemon stopped). */
static void bump_counter(const char *name, uint64_t delta) {
  MDB_env *menv;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_val k = {strlen(name), (void *)name}, v;
  uint64_t x;
  ASSERT_EQ(mdb_env_create(&menv), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(menv, 16), 0);
  ASSERT_EQ(mdb_env_open(menv, env.data_dir, 0, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(menv, NULL, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "info", 0, &dbi), 0);
  ASSERT_EQ(mdb_get(txn, dbi, &k, &v), 0);
  memcpy(&x, v.mv_data, 8);
  x += delta;
  v.mv_data = &x;
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(menv);
}

/* A drifted counter is what verify reports, and what --repair sets right. */
static void check_verify_finds_drift(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Verify v = PCACHEPB__VERIFY__INIT;
  wire_reply rep;
  int fd;
  bump_counter("bytes", 99099);
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "verify");
  req.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
  req.verify = &v;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->verify->n_problems, 1);
  ASSERT_TRUE(strstr(rep.resp->verify->problems[0]->message, "size counter bytes is") != NULL);
  wire_reply_free(&rep);
  v.repair = 1;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->verify->n_problems, 1);
  ASSERT_EQ(rep.resp->verify->removed, 1);
  wire_reply_free(&rep);
  ASSERT_EQ(rel_verify(fd), 0);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
}

int main(void) {
  const char *args[] = {"--max-size", "160K", "--flush-interval", "200", NULL};
  long ops = rel_env_long("PCACHE_REL_COUNTER_OPS", 1500);
  int fds[3];
  wire_reply rep;
  uint64_t used, snap;
  rng = (unsigned)rel_env_long("PCACHE_REL_SEED", 32);
  wire_devkey(1, &keys[0]);
  wire_devkey(2, &keys[1]);
  test_env_init(&env, "rel-counters");
  wire_guard(&env);
  test_daemon_start(&env, args);
  for (int i = 0; i < 3; i++)
    fds[i] = wire_open(&env, apps[i]);
  for (long i = 0; i < ops; i++) {
    unsigned a = rnd(3);
    const pcache__devkey *key = &keys[rnd(4) == 0];
    switch (rnd(16)) {
    case 0:
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
      op_put(fds[a], key);
      break;
    case 6:
    case 7:
      op_get(fds[a], key);
      break;
    case 8:
    case 9:
      op_report(fds[a], key);
      break;
    case 10:
      op_purge(fds[a], key);
      break;
    case 11:
    case 12:
      op_snapshot(fds[a], key, apps[rnd(3)]);
      break;
    case 13:
      op_import(fds[a], key);
      break;
    default:
      op_put(fds[a], key);
      break;
    }
  }
  ASSERT_EQ(rel_verify(fds[0]), 0);
  wire_stats(fds[0], &rep);
  used = rep.resp->stats->bytes_used;
  snap = rep.resp->stats->snapshot_bytes;
  printf("after %ld requests: %llu entries, bytes_used %llu, snapshot_bytes %llu\n", ops,
         (unsigned long long)rep.resp->stats->entries, (unsigned long long)used,
         (unsigned long long)snap);
  wire_reply_free(&rep);
  for (int i = 0; i < 3; i++)
    close(fds[i]);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  check_counters_on_disk(used, snap);
  check_verify_finds_drift();
  test_env_cleanup(&env);
  printf("test_rel_counters: ok\n");
  return 0;
}
