/* (device, app) snapshots on a real pcached: PutSnapshot's validation
 * (each failure with its code), a newer snapshot replacing the old,
 * Prefetch sending the snapshot on the first page only and leaving the
 * covered entries out of every page (offsets count only blobs), the
 * covered hashes filtered to entries that exist, purge and report rules,
 * verify (and repair) of a snapshot damaged in LMDB, a damaged snapshot
 * never sent, and snapshots counted in the size cap. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lmdb.h>

#include <pcache/pcache.h>

#include "common/blob.h"
#include "common/hash.h"
#include "test.h"
#include "wire.h"

enum { N = 24, COVERED = 12, MAX_HASHES = 8 };

static const char APP[] = "snapapp";

/* A PutSnapshot of blob and hashes; returns the reply's status. */
static int put_snapshot(int fd, const Pcachepb__DeviceInfo *dev, const char *app,
                        const uint8_t *blob, size_t blob_size, ProtobufCBinaryData *hashes,
                        size_t n) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__PutSnapshot ps = PCACHEPB__PUT_SNAPSHOT__INIT;
  wire_reply rep;
  int st;
  ps.device = (Pcachepb__DeviceInfo *)dev;
  ps.app = (char *)app;
  ps.blob.data = (uint8_t *)blob;
  ps.blob.len = blob_size;
  ps.state_hashes = hashes;
  ps.n_state_hashes = n;
  req.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
  req.put_snapshot = &ps;
  wire_call(fd, &req, &rep);
  st = rep.resp->status;
  if (st == 0) {
    ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY_PUT_SNAPSHOT);
    ASSERT_EQ(rep.resp->put_snapshot->blob_size, blob_size);
    ASSERT_EQ(rep.resp->put_snapshot->hashes, n);
  } else {
    ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY__NOT_SET);
  }
  wire_reply_free(&rep);
  return st;
}

static void prefetch(int fd, const pcache__devkey *key, uint32_t offset, int snapshot,
                     wire_reply *ret) {
  wire_prefetch(fd, key, 0, offset, snapshot, ret);
}

static int purge(int fd, Pcachepb__Purge *p, uint64_t *ret_snapshots) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  wire_reply rep;
  int st;
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = p;
  wire_call(fd, &req, &rep);
  st = rep.resp->status;
  *ret_snapshots = st == 0 ? rep.resp->purge->snapshots : 0;
  wire_reply_free(&rep);
  return st;
}

static void verify(int fd, int repair, size_t *ret_problems, uint64_t *ret_removed) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Verify v = PCACHEPB__VERIFY__INIT;
  wire_reply rep;
  v.repair = repair;
  req.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
  req.verify = &v;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  *ret_problems = rep.resp->verify->n_problems;
  *ret_removed = rep.resp->verify->removed;
  for (size_t i = 0; i < rep.resp->verify->n_problems; i++) {
    ASSERT_EQ(rep.resp->verify->problems[i]->status, PCACHE_ECHECKSUM);
    ASSERT_EQ(rep.resp->verify->problems[i]->state_hash.len, 0);
  }
  wire_reply_free(&rep);
}

/* Flips one blob byte of the (key, APP) snapshot with the daemon stopped. */
static void damage(const char *data_dir, const pcache__devkey *key) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi data;
  uint8_t k[32 + sizeof APP - 1], *copy;
  MDB_val kv = {sizeof k, k}, v;
  memcpy(k, key->bytes, 32);
  memcpy(k + 32, APP, sizeof APP - 1);
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, data_dir, 0, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(env, NULL, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "snapdata", 0, &data), 0);
  ASSERT_EQ(mdb_get(txn, data, &kv, &v), 0);
  copy = malloc(v.mv_size);
  memcpy(copy, v.mv_data, v.mv_size);
  copy[v.mv_size - 1] ^= 0x5a; /* the blob's last byte: its body */
  v.mv_data = copy;
  ASSERT_EQ(mdb_put(txn, data, &kv, &v, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  free(copy);
}

/* A Report that the snapshot of APP was refused, naming checksum (0:
 * none). Returns the snapshots it dropped. */
static uint32_t report_snapshot(int fd, const pcache__devkey *key, uint64_t checksum) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Report rp = PCACHEPB__REPORT__INIT;
  wire_reply rep;
  uint32_t n;
  rp.device_key.data = (uint8_t *)key->bytes;
  rp.device_key.len = 32;
  rp.snapshot = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
  rp.snapshot_checksum = checksum;
  req.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  req.report = &rp;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  n = rep.resp->report->snapshots;
  wire_reply_free(&rep);
  return n;
}

int main(void) {
  static const char *const args[] = {"--max-hashes", "8", "--max-snapshot", "4096", NULL};
  static wire_item items[N];
  static ProtobufCBinaryData many[(1u << 20) + 1];
  static uint8_t zero16[16];
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  ProtobufCBinaryData hashes[COVERED + 1];
  uint8_t unknown[16], *blob, *blob2, *other_blob, *big;
  pcache__devkey key, other;
  char long_app[202]; /* one byte over the 200 an app name may have */
  Pcachepb__StatsReply s;
  Pcachepb__Purge pg;
  wire_reply rep;
  test_env env;
  uint64_t purged;
  size_t problems;
  uint64_t removed;
  int seen[N] = {0}, fd;

  test_env_init(&env, "snapshot");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, APP);
  wire_devkey(3, &key);
  wire_devkey(4, &other);
  for (size_t base = 0; base < N; base += MAX_HASHES) {
    for (size_t i = base; i < base + MAX_HASHES; i++)
      wire_item_make(&items[i], &key, 500 + i, 64);
    wire_put(fd, &key, &items[base], MAX_HASHES, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->put->stored, MAX_HASHES);
    wire_reply_free(&rep);
  }
  dev.key.data = key.bytes;
  dev.key.len = 32;
  for (size_t i = 0; i < COVERED; i++) {
    hashes[i].data = items[i].hash.bytes;
    hashes[i].len = 16;
  }
  memset(unknown, 0xab, sizeof unknown); /* no entry has it */
  hashes[COVERED].data = unknown;
  hashes[COVERED].len = 16;
  blob = wire_blob(&key, 100, 1);
  blob2 = wire_blob(&key, 200, 2);
  other_blob = wire_blob(&other, 100, 3);
  big = wire_blob(&key, 4097, 4);

  /* Validation: each failure with its code, nothing stored. */
  {
    Pcachepb__DeviceInfo short_dev = dev;
    ProtobufCBinaryData bad = {15, unknown};
    short_dev.key.len = 31;
    ASSERT_EQ(put_snapshot(fd, NULL, APP, blob, 100, hashes, 1), PCACHE_EBAD_KEY);
    ASSERT_EQ(put_snapshot(fd, &short_dev, APP, blob, 100, hashes, 1), PCACHE_EBAD_KEY);
    ASSERT_EQ(put_snapshot(fd, &dev, APP, big, 4097, hashes, 1), PCACHE_EBLOB_TOO_LARGE);
    ASSERT_EQ(put_snapshot(fd, &dev, APP, blob, 10, hashes, 1), PCACHE_EBLOB_SHORT);
    ASSERT_TRUE(pcache__blob_check_header(other_blob, 100, &key) < 0);
    ASSERT_EQ(put_snapshot(fd, &dev, APP, other_blob, 100, hashes, 1),
              pcache__blob_check_header(other_blob, 100, &key));
    ASSERT_EQ(put_snapshot(fd, &dev, APP, blob, 100, &bad, 1), PCACHE_EBAD_KEY);
    memset(long_app, 'a', sizeof long_app - 1);
    long_app[sizeof long_app - 1] = '\0';
    ASSERT_EQ(put_snapshot(fd, &dev, long_app, blob, 100, hashes, 1), PCACHE_EBAD_SIZE);
    for (size_t i = 0; i < (1u << 20) + 1; i++)
      many[i] = (ProtobufCBinaryData){16, zero16};
    ASSERT_EQ(put_snapshot(fd, &dev, APP, blob, 100, many, (1u << 20) + 1),
              PCACHE_ETOO_MANY_HASHES);
    s = wire_stats_of(fd);
    ASSERT_EQ(s.snapshots, 0);
    ASSERT_EQ(s.snapshot_bytes, 0);
  }

  /* Stored, then replaced by a newer one. */
  ASSERT_EQ(put_snapshot(fd, &dev, APP, blob, 100, hashes + 2, COVERED - 2 + 1), 0);
  s = wire_stats_of(fd);
  ASSERT_EQ(s.snapshots, 1);
  ASSERT_EQ(s.snapshot_bytes, 100 + (COVERED - 1) * 16);
  ASSERT_EQ(put_snapshot(fd, &dev, APP, blob2, 200, hashes, COVERED + 1), 0);
  s = wire_stats_of(fd);
  ASSERT_EQ(s.snapshots, 1);
  ASSERT_EQ(s.snapshot_bytes, 200 + (COVERED + 1) * 16);
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__List l = PCACHEPB__LIST__INIT;
    req.body_case = PCACHEPB__REQUEST__BODY_LIST;
    req.list = &l;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->list->n_snapshots, 1);
    ASSERT_STREQ(rep.resp->list->snapshots[0]->app, APP);
    ASSERT_EQ(rep.resp->list->snapshots[0]->blob_size, 200);
    ASSERT_EQ(rep.resp->list->snapshots[0]->hashes, COVERED + 1);
    ASSERT_MEMEQ(rep.resp->list->snapshots[0]->device_key.data, key.bytes, 32);
    wire_reply_free(&rep);
  }

  /* Paging: page 1 = the snapshot (its existing hashes) + 8 blobs of the
   * 12 uncovered entries; page 2 (offset 8, counting blobs only) = the
   * other 4, no snapshot. */
  prefetch(fd, &key, 0, 1, &rep);
  {
    const Pcachepb__GetReply *g = rep.resp->prefetch;
    size_t size;
    const uint8_t *data;
    ASSERT_TRUE(g->snapshot != NULL);
    data = wire_blob_data(&rep, g->snapshot, &size);
    ASSERT_EQ(size, 200);
    ASSERT_MEMEQ(data, blob2, 200);
    ASSERT_EQ(g->snapshot->checksum, pcache__checksum64(blob2, 200));
    ASSERT_EQ(g->n_snapshot_hashes, COVERED); /* the unknown hash is left out */
    for (size_t i = 0; i < g->n_snapshot_hashes; i++) {
      int found = 0;
      for (size_t j = 0; j < COVERED; j++)
        found |= memcmp(g->snapshot_hashes[i].data, items[j].hash.bytes, 16) == 0;
      ASSERT_TRUE(found);
    }
    ASSERT_EQ(g->n_blobs, MAX_HASHES);
    ASSERT_EQ(g->more, 1);
    for (size_t i = 0; i < g->n_blobs; i++)
      for (size_t j = 0; j < N; j++)
        if (memcmp(g->blobs[i]->state_hash.data, items[j].hash.bytes, 16) == 0)
          seen[j]++;
  }
  wire_reply_free(&rep);
  prefetch(fd, &key, MAX_HASHES, 1, &rep);
  ASSERT_TRUE(rep.resp->prefetch->snapshot == NULL);
  ASSERT_EQ(rep.resp->prefetch->n_snapshot_hashes, 0);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, N - COVERED - MAX_HASHES);
  ASSERT_EQ(rep.resp->prefetch->more, 0);
  for (size_t i = 0; i < rep.resp->prefetch->n_blobs; i++)
    for (size_t j = 0; j < N; j++)
      if (memcmp(rep.resp->prefetch->blobs[i]->state_hash.data, items[j].hash.bytes, 16) == 0)
        seen[j]++;
  wire_reply_free(&rep);
  for (size_t j = 0; j < N; j++)
    ASSERT_EQ(seen[j], j < COVERED ? 0 : 1);
  /* A client that does not load snapshots gets every blob, as before. */
  prefetch(fd, &key, 0, 0, &rep);
  ASSERT_TRUE(rep.resp->prefetch->snapshot == NULL);
  ASSERT_EQ(rep.resp->prefetch->n_blobs, MAX_HASHES);
  wire_reply_free(&rep);

  /* An entry purge leaves the snapshot; its hash is no longer announced. */
  pcachepb__purge__init(&pg);
  pg.selector_case = PCACHEPB__PURGE__SELECTOR_STATE_HASH;
  pg.state_hash.data = items[0].hash.bytes;
  pg.state_hash.len = 16;
  ASSERT_EQ(purge(fd, &pg, &purged), 0);
  ASSERT_EQ(purged, 0);
  prefetch(fd, &key, 0, 1, &rep);
  ASSERT_TRUE(rep.resp->prefetch->snapshot != NULL);
  ASSERT_EQ(rep.resp->prefetch->n_snapshot_hashes, COVERED - 1);
  wire_reply_free(&rep);

  /* A report of a snapshot the driver refused drops it: one naming
   * another snapshot's checksum (one a newer upload replaced) leaves the
   * stored one, one naming it or none (clients before 0.3) drops it. */
  ASSERT_EQ(report_snapshot(fd, &key, pcache__checksum64(blob2, 200) ^ 1), 0);
  ASSERT_EQ(wire_stats_of(fd).snapshots, 1);
  ASSERT_EQ(report_snapshot(fd, &key, pcache__checksum64(blob2, 200)), 1);
  ASSERT_EQ(wire_stats_of(fd).snapshots, 0);
  ASSERT_EQ(put_snapshot(fd, &dev, APP, blob2, 200, hashes, COVERED + 1), 0);
  ASSERT_EQ(report_snapshot(fd, &key, 0), 1);
  ASSERT_EQ(wire_stats_of(fd).snapshots, 0);

  /* Purge by app: another app's purge leaves it, its own removes it; so
   * do --device and --all. */
  ASSERT_EQ(put_snapshot(fd, &dev, APP, blob2, 200, hashes, COVERED), 0);
  pcachepb__purge__init(&pg);
  pg.selector_case = PCACHEPB__PURGE__SELECTOR_APP;
  pg.app = (char *)"someone-else";
  ASSERT_EQ(purge(fd, &pg, &purged), 0);
  ASSERT_EQ(purged, 0);
  pg.app = (char *)APP;
  ASSERT_EQ(purge(fd, &pg, &purged), 0);
  ASSERT_EQ(purged, 1);
  ASSERT_EQ(put_snapshot(fd, &dev, APP, blob2, 200, hashes, COVERED), 0);
  pcachepb__purge__init(&pg);
  pg.selector_case = PCACHEPB__PURGE__SELECTOR_DEVICE_KEY;
  pg.device_key.data = other.bytes;
  pg.device_key.len = 32;
  ASSERT_EQ(purge(fd, &pg, &purged), 0);
  ASSERT_EQ(purged, 0);
  pg.device_key.data = key.bytes;
  ASSERT_EQ(purge(fd, &pg, &purged), 0);
  ASSERT_EQ(purged, 1);
  s = wire_stats_of(fd);
  ASSERT_EQ(s.snapshots, 0);
  ASSERT_EQ(s.snapshot_bytes, 0);
  ASSERT_EQ(s.entries, 0);

  /* Verify: a damaged snapshot is a problem; repair drops it. */
  ASSERT_EQ(put_snapshot(fd, &dev, APP, blob2, 200, hashes, COVERED), 0);
  verify(fd, 0, &problems, &removed);
  ASSERT_EQ(problems, 0);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  damage(env.data_dir, &key);
  test_daemon_start(&env, args);
  fd = wire_open(&env, APP);
  verify(fd, 0, &problems, &removed);
  ASSERT_EQ(problems, 1);
  ASSERT_EQ(removed, 0);
  verify(fd, 1, &problems, &removed);
  ASSERT_EQ(problems, 1);
  ASSERT_EQ(removed, 1);
  ASSERT_EQ(wire_stats_of(fd).snapshots, 0);

  /* A damaged snapshot is never sent, and dropped. */
  ASSERT_EQ(put_snapshot(fd, &dev, APP, blob2, 200, hashes, COVERED), 0);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  damage(env.data_dir, &key);
  test_daemon_start(&env, args);
  fd = wire_open(&env, APP);
  prefetch(fd, &key, 0, 1, &rep);
  ASSERT_TRUE(rep.resp->prefetch->snapshot == NULL);
  ASSERT_EQ(rep.resp->prefetch->n_snapshot_hashes, 0);
  wire_reply_free(&rep);
  s = wire_stats_of(fd);
  ASSERT_GE(s.checksum_failures, 1);
  /* The drop is a write: a verify behind it sees its result. */
  verify(fd, 0, &problems, &removed);
  ASSERT_EQ(problems, 0);
  ASSERT_EQ(wire_stats_of(fd).snapshots, 0);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);

  /* The size cap counts snapshots, and drops them before entries. */
  {
    static const char *const capped[] = {"--max-size", "8192", "--max-snapshot", "65536",
                                         NULL};
    uint8_t *huge = wire_blob(&key, 6000, 5);
    test_daemon_start(&env, capped);
    fd = wire_open(&env, APP);
    wire_put(fd, &key, items + 1, 4, &rep);
    ASSERT_EQ(rep.resp->put->stored, 4);
    wire_reply_free(&rep);
    ASSERT_EQ(put_snapshot(fd, &dev, APP, huge, 6000, hashes, 2), 0);
    s = wire_stats_of(fd);
    ASSERT_EQ(s.snapshots, 1);
    ASSERT_LE(s.bytes_used + s.snapshot_bytes, 8192);
    ASSERT_EQ(s.entries, 4);
    /* Another app's snapshot: the older one goes, not entries. */
    ASSERT_EQ(put_snapshot(fd, &dev, "second", huge, 6000, hashes, 2), 0);
    s = wire_stats_of(fd);
    ASSERT_EQ(s.snapshots, 1);
    ASSERT_EQ(s.entries, 4);
    ASSERT_LE(s.bytes_used + s.snapshot_bytes, 8192);
    free(huge);
    close(fd);
    ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  }

  for (size_t i = 0; i < N; i++)
    wire_item_free(&items[i]);
  free(blob);
  free(blob2);
  free(other_blob);
  free(big);
  test_env_cleanup(&env);
  return 0;
}
