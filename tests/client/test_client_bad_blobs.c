/* Blobs that must never reach the driver. With the daemon stopped, its
 * store is edited through LMDB (as the daemon tests do): one blob gets a
 * corrupted body (the daemon's own checksum catches it and drops the
 * entry), one gets the header of another device under our device key with
 * a matching checksum (only the client can tell: it refuses it before the
 * driver, counts it, and reports it, and the daemon drops it). The
 * client's own checksum check is driven directly as well. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <lmdb.h>

#include "common/bytes.h"
#include "client/device.h"
#include "client/blobs.h"
#include "client_util.h"
#include "common/blob.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

/* 0 when the blob was merged, else the reason the client refused it. */
static int merge_reason(pcache_device *device, const uint8_t *blob, size_t size,
                        uint64_t checksum) {
  Pcachepb__ReportReason reason = 0;
  return pcache__blob_merge(device, blob, size, checksum, &reason) == 0 ? 0 : (int)reason;
}

static pcache__hash graphics_hash(pcache_device *device, const test_objects *o, uint32_t v) {
  test_graphics g;
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  test_graphics_info(&g, o, v);
  pcache__desc_buf_init(&buf);
  ASSERT_OK(pcache__desc_graphics(&g.info, &device->core.lookup, &buf, &keys));
  pcache__desc_buf_release(&buf);
  return keys.state_hash;
}

/* Replaces the blob of (key, hash); fix_meta: make the entry's checksum
 * match the new bytes, so only a header check can catch it. */
static void edit_store(const char *data_dir, const pcache__devkey *key, const pcache__hash *hash,
                       const uint8_t *blob, size_t size, int fix_meta) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi entries, blobs;
  uint8_t k[PCACHE_DEVKEY_SIZE + PCACHE_HASH_SIZE], meta[1024];
  MDB_val kv = {.mv_size = sizeof k, .mv_data = k}, v;
  memcpy(k, key->bytes, PCACHE_DEVKEY_SIZE);
  memcpy(k + PCACHE_DEVKEY_SIZE, hash->bytes, PCACHE_HASH_SIZE);
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, data_dir, 0, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(env, NULL, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "entries", 0, &entries), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "blobs", 0, &blobs), 0);
  ASSERT_EQ(mdb_get(txn, blobs, &kv, &v), 0);
  ASSERT_EQ(v.mv_size, size);
  v = (MDB_val){.mv_size = size, .mv_data = (void *)blob};
  ASSERT_EQ(mdb_put(txn, blobs, &kv, &v, 0), 0);
  if (fix_meta) {
    /* docs/storage.md: the entry record holds the blob checksum at 24. */
    ASSERT_EQ(mdb_get(txn, entries, &kv, &v), 0);
    ASSERT_TRUE(v.mv_size <= sizeof meta && v.mv_size >= 32);
    memcpy(meta, v.mv_data, v.mv_size);
    pcache__put_le64(meta + 24, pcache__checksum64(blob, size));
    v.mv_data = meta;
    ASSERT_EQ(mdb_put(txn, entries, &kv, &v, 0), 0);
  }
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
}

int main(void) {
  test_env env;
  util_app a;
  pcache_stats st;
  pcache__hash h0, h1;
  pcache__devkey key, other;
  uint8_t blob[PCACHE_BLOB_HEADER_SIZE], uuid[PCACHE_UUID_SIZE];
  Pcachepb__Response *stats;

  /* Per-pipeline blobs are what this test damages: a (device, app)
   * snapshot would carry them instead (test_client_snapshot covers it). */
  setenv("PCACHE_NO_SNAPSHOT", "1", 1);
  test_env_init(&env, "client-bad-blobs");
  test_daemon_start(&env, NULL);

  /* Cold: three entries. */
  util_app_open(&a, 5000);
  util_build_set(a.device, &a.o, 2, 1, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_EQ(util_count_entries(), 3);
  key = a.device->core.key;
  h0 = graphics_hash(a.device, &a.o, 0);
  h1 = graphics_hash(a.device, &a.o, 1);

  /* The client's checks, driven directly: nothing bad reaches the driver. */
  pcache__blob_write_header(&key, blob);
  ASSERT_EQ(merge_reason(a.device, blob, sizeof blob, pcache__checksum64(blob, 32)), 0);
  ASSERT_EQ(merge_reason(a.device, blob, sizeof blob, 12345),
            PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM);
  ASSERT_EQ(merge_reason(a.device, NULL, 0, 0), PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM);
  memcpy(uuid, pcache__devkey_uuid(&key), sizeof uuid);
  uuid[0] ^= 0xff;
  pcache__devkey_make(uuid, pcache__devkey_vendor(&key), pcache__devkey_device(&key),
                      pcache__devkey_driver_version(&key), pcache__devkey_abi(&key), &other);
  pcache__blob_write_header(&other, blob);
  ASSERT_EQ(merge_reason(a.device, blob, sizeof blob, pcache__checksum64(blob, 32)),
            PCACHEPB__REPORT_REASON__REPORT_REASON_HEADER);
  test_objects_destroy(&a.o);
  pcache_device_destroy(a.device);
  pcache_client_close(a.client);

  /* Damage the store with the daemon stopped. */
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM) & 0x7f, 0);
  pcache__blob_write_header(&key, blob);
  blob[20] ^= 0x5a; /* a corrupted body: checksum no longer matches */
  edit_store(env.data_dir, &key, &h0, blob, sizeof blob, 0);
  pcache__blob_write_header(&other, blob); /* another device's, checksum fixed */
  edit_store(env.data_dir, &key, &h1, blob, sizeof blob, 1);
  test_daemon_start(&env, NULL);

  /* Warm: the prefetch gets the compute blob and the wrong-device one. */
  a.client = util_client(5000);
  ASSERT_OK(pcache_device_create(a.client, &a.info, &a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.prefetched, 1);
  ASSERT_EQ(st.rejected_blobs, 1);
  /* The reports go from the upload thread; a flush waits for them. */
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_EQ(util_count_entries(), 1); /* both bad entries dropped */
  stats = util_stats();
  ASSERT_GE(stats->stats->checksum_failures, 1);
  ASSERT_GE(stats->stats->reports, 1);
  pcache__response_free(stats);

  /* The app never notices: the two are compiled again and re-uploaded. */
  test_objects_create(&a.o, a.device);
  util_build_set(a.device, &a.o, 2, 1, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.compiles, 2);
  ASSERT_EQ(st.daemon_hits, 1);
  ASSERT_EQ(st.uploaded, 2);
  ASSERT_EQ(st.rejected_blobs, 1);
  ASSERT_EQ(util_count_entries(), 3);

  util_app_close(&a);
  test_env_cleanup(&env);
  return 0;
}
