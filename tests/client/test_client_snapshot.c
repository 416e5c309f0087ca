/* (device, app) snapshots through libpcache and lavapipe (whose cache data
 * is a 32-byte header: still a valid snapshot). Cold run: pipelines and
 * one snapshot are uploaded. Warm run, in a new process: the device cache
 * is made from the snapshot, nothing is compiled, no per-pipeline blob or
 * Get is needed, and no new snapshot is uploaded. A snapshot whose body is
 * damaged in LMDB is dropped by the daemon (the run falls back to blobs
 * and uploads a new one); one with another device's header and a valid
 * checksum is refused by the client before the driver and reported. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lmdb.h>

#include "common/bytes.h"
#include "client_util.h"
#include "common/hash.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define N_GRAPHICS 6
#define N_COMPUTE 2
#define N_PIPELINES (N_GRAPHICS + N_COMPUTE)

/* One process's run: "cold", "warm", "fallback" (the daemon dropped a
 * damaged snapshot), "header" (the client refuses the snapshot), or
 * through the mapped segment without a prefetch: "seg-nosnap" (no
 * snapshot loaded or uploaded) and "seg-header" (the first miss loads the
 * segment's snapshot and refuses it), and with one, "seg-header-pf"
 * (creation refuses it, and asks the socket for no snapshot after). */
static void run(const char *mode) {
  util_app a;
  pcache_stats st;
  int seg = strncmp(mode, "seg-", 4) == 0;

  if (seg) {
    unsetenv("PCACHE_NO_SEGMENT");
    if (strcmp(mode, "seg-header-pf") != 0)
      setenv("PCACHE_NO_PREFETCH", "1", 1);
    if (strcmp(mode, "seg-nosnap") == 0)
      setenv("PCACHE_NO_SNAPSHOT", "1", 1);
  }
  util_app_open_device(&a, 5000);
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  if (strcmp(mode, "warm") == 0) {
    ASSERT_EQ(st.snapshot_loaded, N_PIPELINES);
    ASSERT_EQ(st.prefetched, N_PIPELINES);
  } else if (strcmp(mode, "fallback") == 0) {
    ASSERT_EQ(st.snapshot_loaded, 0);
    ASSERT_EQ(st.prefetched, N_PIPELINES); /* the blobs, one by one */
    ASSERT_EQ(st.rejected_blobs, 0);
  } else if (strcmp(mode, "seg-header-pf") == 0) {
    /* Refused once: the prefetch's pages asked for no snapshot after it,
     * so the same one did not come again before its report landed. */
    ASSERT_EQ(st.snapshot_loaded, 0);
    ASSERT_EQ(st.prefetched, N_PIPELINES);
    ASSERT_EQ(st.rejected_blobs, 1);
  } else if (strcmp(mode, "header") == 0) {
    ASSERT_EQ(st.snapshot_loaded, 0);
    ASSERT_EQ(st.prefetched, 0); /* covered blobs are left to Gets */
    ASSERT_EQ(st.rejected_blobs, 1);
  } else {
    ASSERT_EQ(st.snapshot_loaded, 0);
    ASSERT_EQ(st.prefetched, 0);
  }
  test_objects_create(&a.o, a.device);
  util_build_set(a.device, &a.o, N_GRAPHICS, N_COMPUTE, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.misses, N_PIPELINES);
  if (strcmp(mode, "cold") == 0) {
    ASSERT_EQ(st.compiles, N_PIPELINES);
    ASSERT_EQ(st.uploaded, N_PIPELINES);
    ASSERT_EQ(st.snapshots_uploaded, 1);
  } else {
    ASSERT_EQ(st.compiles, 0);
    ASSERT_EQ(st.daemon_hits, N_PIPELINES);
    ASSERT_EQ(st.uploaded, 0);
    /* Unchanged: nothing to upload; otherwise one new snapshot. */
    ASSERT_EQ(st.snapshots_uploaded,
              (strcmp(mode, "warm") == 0 || strcmp(mode, "seg-nosnap") == 0 ? 0u : 1u));
  }
  if (strcmp(mode, "seg-header") == 0) {
    /* Refused before the driver at the first miss; every pipeline then
     * came as its own blob from the segment. */
    ASSERT_EQ(st.snapshot_loaded, 0);
    ASSERT_EQ(st.prefetched, 0);
    ASSERT_EQ(st.rejected_blobs, 1);
  }
  util_app_close(&a);
}

static void stats(uint64_t *ret_gets, uint64_t *ret_snapshots, uint64_t *ret_checksum,
                  uint64_t *ret_reports) {
  Pcachepb__Response *r = util_stats();
  *ret_gets = r->stats->gets;
  *ret_snapshots = r->stats->snapshots;
  *ret_checksum = r->stats->checksum_failures;
  *ret_reports = r->stats->reports;
  pcache__response_free(r);
}

/* Edits the one snapshot in the stopped daemon's store
 * (docs/storage.md): flips a byte of the blob's body, or (wrong_device)
 * gives the blob another pipelineCacheUUID and fixes the checksum. */
static void damage(const char *data_dir, int wrong_device) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi meta_db, data_db;
  MDB_cursor *cur;
  MDB_val k, v, dv;
  uint8_t meta[48], *data;
  uint64_t blob_size;
  ASSERT_EQ(mdb_env_create(&env), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(env, 16), 0);
  ASSERT_EQ(mdb_env_open(env, data_dir, 0, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(env, NULL, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "snapshots", 0, &meta_db), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "snapdata", 0, &data_db), 0);
  ASSERT_EQ(mdb_cursor_open(txn, meta_db, &cur), 0);
  ASSERT_EQ(mdb_cursor_get(cur, &k, &v, MDB_FIRST), 0);
  mdb_cursor_close(cur);
  ASSERT_EQ(v.mv_size, sizeof meta);
  memcpy(meta, v.mv_data, sizeof meta);
  blob_size = pcache__le64(meta + 8);
  ASSERT_GE(blob_size, 32);
  ASSERT_EQ(mdb_get(txn, data_db, &k, &dv), 0);
  data = malloc(dv.mv_size);
  memcpy(data, dv.mv_data, dv.mv_size);
  if (wrong_device) {
    uint8_t *blob = data + dv.mv_size - blob_size;
    blob[16] ^= 0xff; /* VkPipelineCacheHeaderVersionOne.pipelineCacheUUID[0] */
    pcache__put_le64(meta + 24, pcache__checksum64(blob, blob_size));
    v = (MDB_val){sizeof meta, meta};
    ASSERT_EQ(mdb_put(txn, meta_db, &k, &v, 0), 0);
  } else {
    data[dv.mv_size - 1] ^= 0x5a;
  }
  dv.mv_data = data;
  ASSERT_EQ(mdb_put(txn, data_db, &k, &dv, 0), 0);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(env);
  free(data);
}

/* Stops the daemon, damages its snapshot as damage() does, starts it
 * again and runs this test's mode in a child. */
static void damage_and_run(test_env *env, int wrong_device, const char *argv0, const char *mode) {
  ASSERT_EQ(test_daemon_stop(env, SIGTERM) & 0x7f, 0);
  damage(env->data_dir, wrong_device);
  test_daemon_start(env, NULL);
  util_run_self(argv0, mode);
}

/* Restarts the daemon with the snapshot given another device's header,
 * then runs children that neither load nor upload a snapshot until one is
 * handed a current segment (the first asks the daemon to build it; one
 * whose segment went stale meanwhile asks for another): the next run is
 * handed that segment, damaged snapshot and all. */
static void segment_damaged(test_env *env, const char *argv0) {
  ASSERT_EQ(test_daemon_stop(env, SIGTERM) & 0x7f, 0);
  damage(env->data_dir, 1);
  test_daemon_start(env, NULL);
  for (int i = 0;; i++) {
    uint64_t sent = util_segments_sent(), builds = util_segment_builds();
    util_run_self(argv0, "seg-nosnap");
    if (util_segments_sent() > sent)
      break;
    ASSERT_LT(i, 5);
    util_wait_segment_builds(builds + 1);
  }
}

int main(int argc, char **argv) {
  test_env env;
  uint64_t gets0, gets1, snaps, checksum, reports;
  /* The socket path's snapshot handling, which serves whatever a
   * segment lacks (test_client_segment covers segments). */
  setenv("PCACHE_NO_SEGMENT", "1", 1);
  if (argc > 1) {
    run(argv[1]); /* the parent's environment names its daemon */
    return 0;
  }
  test_env_init(&env, "client-snapshot");
  test_daemon_start(&env, NULL);
  run("cold");
  ASSERT_EQ(util_count_entries(), N_PIPELINES);
  stats(&gets0, &snaps, &checksum, &reports);
  ASSERT_EQ(snaps, 1);

  /* Warm: one Prefetch and no Get (every pipeline came in the snapshot). */
  util_run_self(argv[0], "warm");
  stats(&gets1, &snaps, &checksum, &reports);
  ASSERT_EQ(gets1 - gets0, 1);
  ASSERT_EQ(snaps, 1);
  /* Unchanged, again: still no new snapshot (the child checks). */
  util_run_self(argv[0], "warm");

  /* A damaged body: the daemon never sends it and drops it; the run goes
   * blob by blob and uploads a new snapshot, which the next run loads. */
  damage_and_run(&env, 0, argv[0], "fallback");
  stats(&gets0, &snaps, &checksum, &reports);
  ASSERT_GE(checksum, 1);
  ASSERT_EQ(snaps, 1);
  util_run_self(argv[0], "warm");

  /* Another device's header, checksum fixed: only the client can tell. It
   * refuses it before the driver, reports it (the daemon drops it), Gets
   * the covered pipelines one by one and uploads a good snapshot. */
  damage_and_run(&env, 1, argv[0], "header");
  stats(&gets1, &snaps, &checksum, &reports);
  ASSERT_GE(reports, 1);
  ASSERT_EQ(gets1, 1 + N_PIPELINES); /* the Prefetch, then a Get per pipeline */
  ASSERT_EQ(snaps, 1);
  util_run_self(argv[0], "warm");
  ASSERT_EQ(util_count_entries(), N_PIPELINES);

  /* The same refusal through the mapped segment, without a prefetch: the
   * first miss loads the segment's snapshot, refuses it before the driver
   * and has the upload thread report it; each miss then loads its own
   * blob from the segment (no Get). Then with a prefetch: creation refuses
   * it, once. */
  segment_damaged(&env, argv[0]);
  stats(&gets0, &snaps, &checksum, &reports);
  util_run_self(argv[0], "seg-header");
  {
    uint64_t reports1;
    stats(&gets1, &snaps, &checksum, &reports1);
    ASSERT_GE(reports1 - reports, 1);
    ASSERT_EQ(gets1 - gets0, 1); /* the Segment request */
  }
  segment_damaged(&env, argv[0]);
  util_run_self(argv[0], "seg-header-pf");
  test_env_cleanup(&env);
  return 0;
}
