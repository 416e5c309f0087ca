/* The replay's in-memory state follows the store (daemon/replay/replay.h,
 * pcd_replay_state): a replay job whose transaction aborts (a full map,
 * which the writer answers by evicting and running the batch again; or
 * another job's failure) leaves the state as the last commit left it, and
 * the lock free. Drives the writer's own sequence (run in a write
 * transaction, then abort and the aborted hooks, or commit and the
 * committed hooks) on a real LMDB store, with a device record standing in
 * for a store an older driver filled.
 *
 * Then the skipped eviction (docs/replay.md, "After the replay"): when a
 * client used an old key's entry after its replay began, the old key's
 * entries stay, in the LRU index, and size eviction reaches them oldest
 * first like any other.
 *
 * Last, the progress Stats shows for a replay that waits behind another
 * (two devices' drivers updated): its total is its old key's entries, not
 * the 0 its record holds until it is loaded.
 *
 * And a replay to a driver build no device has any more, under way when
 * a newer build is named, gives way to the newer build's replays. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/bytes.h"
#include "eviction.h"
#include "jobs.h"
#include "replay.h"
#include "server.h"
#include "store_internal.h"
#include "test.h"

static pcd_store *store;
static pcd_replay *rp;
static uint8_t old_key[PCACHE_DEVKEY_SIZE], new_key[PCACHE_DEVKEY_SIZE];

/* Runs job alone as the writer would, then aborts (commit 0) or commits. */
static void run_job(pcd_job *job, int commit) {
  pcd_txn *txn;
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  ASSERT_OK(job->ops->run(txn, NULL, job));
  if (commit) {
    ASSERT_OK(pcd_txn_commit(txn));
    job->ops->committed(job);
  } else {
    pcd_txn_abort(txn);
    job->ops->aborted(job);
  }
  /* Whichever way it ended, the lock is free again. */
  ASSERT_EQ(pthread_mutex_trylock(&rp->lock), 0);
  pthread_mutex_unlock(&rp->lock);
}

static pcd_job *new_job(pcd_job_type type) {
  pcd_job *job = pcd_job_new(type);
  ASSERT_TRUE(job != NULL);
  job->ctx = rp;
  return job;
}

/* A ReplayClaim of the new key, reporting nothing; req and claim are the
 * caller's (job->req is set to NULL before the job is freed). */
static pcd_job *claim_job(Pcachepb__Request *req, Pcachepb__ReplayClaim *claim) {
  pcd_job *job = new_job(PCD_JOB_REPLAY_CLAIM);
  req->body_case = PCACHEPB__REQUEST__BODY_REPLAY_CLAIM;
  req->replay_claim = claim;
  claim->new_key.data = new_key;
  claim->new_key.len = PCACHE_DEVKEY_SIZE;
  job->req = req;
  /* As if from the replayer pcached started: only its claims are heard. */
  job->peer_pid = (uint32_t)getpid();
  return job;
}

static int record_state(void) {
  pcd_replay_record rec;
  pcd_txn *txn;
  int r;
  ASSERT_OK(pcd_txn_begin(store, 0, &txn));
  r = pcd_replay_record_get(txn, old_key, new_key, &rec);
  pcd_txn_abort(txn);
  return r < 0 ? r : (int)rec.state;
}

/* The store after a driver update: the old key's device record, with an
 * entry to its name (enough for ReplayStart to see a key to replay). */
static void make_store(const char *dir) {
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  pcd_txn *txn;
  for (int i = 0; i < PCACHE_DEVKEY_SIZE; i++)
    old_key[i] = (uint8_t)(i * 7 + 1);
  pcache__put_le32(old_key + 24, 100);
  /* A device's ABI (64-bit): the pattern above would carry the staged
   * mark, which no device key has (common/devkey.h). */
  pcache__put_le32(old_key + 28, 8);
  memcpy(new_key, old_key, PCACHE_DEVKEY_SIZE);
  pcache__put_le32(new_key + 24, 101);
  ASSERT_OK(pcd_store_open(dir, 16ull << 20, &store));
  info.key.data = old_key;
  info.key.len = PCACHE_DEVKEY_SIZE;
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  ASSERT_OK(pcd_device_touch(txn, &info, 1000));
  ASSERT_OK(pcd_device_add(txn, old_key, 1, 64));
  ASSERT_OK(pcd_txn_commit(txn));
}

/* An entry of key with state hash byte h, used last at used_us. */
static void put_entry(pcd_txn *txn, const uint8_t *key, uint8_t h, uint64_t used_us) {
  static const uint8_t blob[256], desc[16];
  pcd_entry e = {.kind = 0, .created_us = used_us, .last_used_us = used_us};
  memcpy(e.key, key, PCACHE_DEVKEY_SIZE);
  memset(e.key + PCACHE_DEVKEY_SIZE, h, PCACHE_HASH_SIZE);
  e.blob_size = sizeof blob;
  e.desc_size = sizeof desc;
  snprintf(e.app, sizeof e.app, "game");
  ASSERT_OK(pcd_entry_store(txn, &e, blob, desc));
}

static int has_entry(const uint8_t *key, uint8_t h) {
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcd_entry e;
  pcd_txn *txn;
  int r;
  memcpy(k, key, PCACHE_DEVKEY_SIZE);
  memset(k + PCACHE_DEVKEY_SIZE, h, PCACHE_HASH_SIZE);
  ASSERT_OK(pcd_txn_begin(store, 0, &txn));
  r = pcd_entry_get(txn, k, &e);
  pcd_txn_abort(txn);
  ASSERT_TRUE(r == 0 || r == PCACHE_ENOT_FOUND);
  return r == 0;
}

/* Two driver builds side by side: the old key's entries (1, 2) are in
 * the new key too, so the replay has nothing to build; entry 1 is used
 * after the replay began. */
static void side_by_side(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplayClaim claim = PCACHEPB__REPLAY_CLAIM__INIT;
  uint64_t t0 = pcd_now_us() - 10000000, n = 0, bytes = 0;
  uint8_t k1[PCD_ENTRY_KEY_SIZE];
  pcd_job *job;
  pcd_txn *txn;
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  info.key.len = PCACHE_DEVKEY_SIZE;
  info.key.data = old_key;
  ASSERT_OK(pcd_device_touch(txn, &info, 2000));
  info.key.data = new_key;
  ASSERT_OK(pcd_device_touch(txn, &info, 3000)); /* the build named last */
  put_entry(txn, old_key, 1, t0);
  put_entry(txn, old_key, 2, t0 + 1);
  put_entry(txn, new_key, 1, t0 + 2);
  put_entry(txn, new_key, 2, t0 + 3);
  ASSERT_OK(pcd_txn_commit(txn));
  job = new_job(PCD_JOB_REPLAY_START); /* as `pcachectl replay` asks */
  job->req = &req;
  req.body_case = PCACHEPB__REQUEST__BODY_REPLAY_START;
  {
    Pcachepb__ReplayStart start = PCACHEPB__REPLAY_START__INIT;
    req.replay_start = &start;
    start.app = "";
    run_job(job, 1);
  }
  job->req = NULL;
  pcd_job_free(job);
  ASSERT_EQ(rp->st.active, 1);
  ASSERT_EQ(rp->st.total, 2);
  ASSERT_EQ(rp->st.done, 2);
  /* The other build's client uses entry 1 now. */
  memcpy(k1, old_key, PCACHE_DEVKEY_SIZE);
  memset(k1 + PCACHE_DEVKEY_SIZE, 1, PCACHE_HASH_SIZE);
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  ASSERT_OK(pcd_entry_touch(txn, k1, pcd_now_us() + 1000, 1));
  ASSERT_OK(pcd_txn_commit(txn));
  job = claim_job(&req, &claim);
  run_job(job, 1);
  ASSERT_EQ(rp->st.finished_now, 1);
  job->req = NULL;
  pcd_job_free(job);
  job = new_job(PCD_JOB_REPLAY_SYNC);
  run_job(job, 1);
  pcd_job_free(job);
  ASSERT_EQ(rp->st.active, 0);
  /* Skipped: the old key's entries stay, all of them. */
  ASSERT_TRUE(has_entry(old_key, 1) && has_entry(old_key, 2));
  /* ... and size eviction reaches them in LRU order: the old key's unused
   * entry 2 goes before the new key's; entry 1, just used, is the newest
   * and the last to go. */
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  {
    pcd_totals t;
    ASSERT_OK(pcd_totals_get(txn, &t));
    ASSERT_OK(pcd_evict_some(txn, t.bytes - 1, 1, &n, &bytes));
  }
  ASSERT_OK(pcd_txn_commit(txn));
  ASSERT_EQ(n, 1);
  ASSERT_TRUE(!has_entry(old_key, 2));
  ASSERT_TRUE(has_entry(old_key, 1) && has_entry(new_key, 1) && has_entry(new_key, 2));
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  ASSERT_OK(pcd_evict_some(txn, 0, 2, &n, &bytes));
  ASSERT_OK(pcd_txn_commit(txn));
  ASSERT_TRUE(!has_entry(new_key, 1) && !has_entry(new_key, 2) && has_entry(old_key, 1));
}

/* out: another driver build (version) of key's device. */
static void build_of(uint8_t *out, const uint8_t *key, uint32_t version) {
  memcpy(out, key, PCACHE_DEVKEY_SIZE);
  pcache__put_le32(out + 24, version);
}

/* A device record for key, last seen at seen. */
static void touch(pcd_txn *txn, uint8_t *key, uint64_t seen) {
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  info.key.data = key;
  info.key.len = PCACHE_DEVKEY_SIZE;
  ASSERT_OK(pcd_device_touch(txn, &info, seen));
}

/* The progress of a replay that waits behind another (a second device's
 * driver updated too): its total is what the old key holds, not the 0
 * its record keeps until it is loaded ("100% 0/0 done" for a replay not
 * begun). */
static void waiting_behind(void) {
  uint8_t a_old[PCACHE_DEVKEY_SIZE], a_new[PCACHE_DEVKEY_SIZE];
  uint8_t b_old[PCACHE_DEVKEY_SIZE], b_new[PCACHE_DEVKEY_SIZE];
  Pcachepb__ReplayProgress **items;
  uint64_t t0 = pcd_now_us() - 10000000;
  pcache__arena arena = {0};
  size_t n, seen = 0;
  pcd_job *job;
  pcd_txn *txn;
  memcpy(a_old, old_key, PCACHE_DEVKEY_SIZE);
  a_old[16] ^= 0x55; /* two other devices than the keys above */
  memcpy(b_old, a_old, PCACHE_DEVKEY_SIZE);
  b_old[17] ^= 0x55;
  build_of(a_new, a_old, 101);
  build_of(b_new, b_old, 101);
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  touch(txn, a_old, 4000);
  touch(txn, b_old, 4000);
  put_entry(txn, a_old, 1, t0);
  put_entry(txn, a_old, 2, t0 + 1);
  for (uint8_t h = 1; h <= 3; h++)
    put_entry(txn, b_old, h, t0 + h);
  ASSERT_OK(pcd_txn_commit(txn));
  /* A client on each new build: A's replay is loaded, B's waits. */
  for (int i = 0; i < 2; i++) {
    job = new_job(PCD_JOB_REPLAY_START);
    memcpy(job->device_key, i ? b_new : a_new, PCACHE_DEVKEY_SIZE);
    run_job(job, 1);
    pcd_job_free(job);
  }
  ASSERT_TRUE(rp->st.active && memcmp(rp->st.rec.new_key, a_new, PCACHE_DEVKEY_SIZE) == 0);
  ASSERT_OK(pcd_txn_begin(store, 0, &txn));
  ASSERT_OK(pcd_replay_progress(rp, txn, &arena, &items, &n));
  for (size_t i = 0; i < n; i++) {
    if (memcmp(items[i]->new_key.data, a_new, PCACHE_DEVKEY_SIZE) == 0) {
      ASSERT_EQ(items[i]->total, 2);
      seen++;
    } else if (memcmp(items[i]->new_key.data, b_new, PCACHE_DEVKEY_SIZE) == 0) {
      ASSERT_TRUE(!items[i]->finished);
      ASSERT_EQ(items[i]->total, 3);
      ASSERT_EQ(items[i]->done, 0);
      seen++;
    }
  }
  pcd_txn_abort(txn);
  pcache__arena_free(&arena);
  ASSERT_EQ(seen, 2);
}

static int has_record(const uint8_t *o, const uint8_t *nk) {
  pcd_replay_record rec;
  pcd_txn *txn;
  int r;
  ASSERT_OK(pcd_txn_begin(store, 0, &txn));
  r = pcd_replay_record_get(txn, o, nk, &rec);
  pcd_txn_abort(txn);
  return r == 0 && rec.state == PCD_REPLAY_PENDING;
}

static void start_key(const uint8_t *key) {
  pcd_job *job = new_job(PCD_JOB_REPLAY_START);
  memcpy(job->device_key, key, PCACHE_DEVKEY_SIZE);
  run_job(job, 1);
  pcd_job_free(job);
}

/* The supervisor's side of a replayer for key that exits 3 (no device),
 * then the sync job it queues. */
static void no_device_exit(const uint8_t *key) {
  pcd_job *job = new_job(PCD_JOB_REPLAY_SYNC);
  pthread_mutex_lock(&rp->lock);
  pcd_replay_no_device(rp, key);
  pthread_mutex_unlock(&rp->lock);
  run_job(job, 1);
  pcd_job_free(job);
}

/* A binary device's global key changed twice (builds 1, 2, 3): the replay
 * to build 2 is under way when build 3 is named, so it is not retired
 * then; its replayer finds no device. It gives way to build 3's replays,
 * its record retired, and the exit of a second replayer for build 2 (one
 * started before the first one's exit was seen) is build 2's, not that of
 * build 3's replay, loaded by then (binary_test.sh step 7, under load). */
static void gone_build_gives_way(void) {
  uint8_t b1[PCACHE_DEVKEY_SIZE], b2[PCACHE_DEVKEY_SIZE], b3[PCACHE_DEVKEY_SIZE];
  uint64_t t0 = pcd_now_us() - 10000000;
  pcd_txn *txn;
  memcpy(b1, old_key, PCACHE_DEVKEY_SIZE);
  b1[16] ^= 0xaa; /* a device of its own */
  build_of(b2, b1, 101);
  build_of(b3, b1, 102);
  ASSERT_OK(pcd_txn_begin(store, 1, &txn));
  touch(txn, b1, 5000);
  touch(txn, b2, 5001);
  put_entry(txn, b1, 1, t0);
  put_entry(txn, b2, 1, t0 + 1);
  ASSERT_OK(pcd_txn_commit(txn));
  while (rp->st.active) /* what the tests above left loaded */
    no_device_exit(rp->st.rec.new_key);
  start_key(b2);
  ASSERT_TRUE(rp->st.active && memcmp(rp->st.rec.new_key, b2, PCACHE_DEVKEY_SIZE) == 0);
  memcpy(rp->spawned_key, b2, PCACHE_DEVKEY_SIZE); /* its replayer runs */
  start_key(b3);
  ASSERT_TRUE(has_record(b1, b2)); /* under way: kept */
  ASSERT_TRUE(has_record(b1, b3) && has_record(b2, b3));
  ASSERT_TRUE(memcmp(rp->st.rec.new_key, b2, PCACHE_DEVKEY_SIZE) == 0);
  no_device_exit(b2);
  ASSERT_TRUE(!has_record(b1, b2));
  ASSERT_TRUE(rp->st.active && memcmp(rp->st.rec.new_key, b3, PCACHE_DEVKEY_SIZE) == 0);
  no_device_exit(b2); /* the late second replayer for build 2 */
  ASSERT_TRUE(rp->st.active && memcmp(rp->st.rec.new_key, b3, PCACHE_DEVKEY_SIZE) == 0);
  ASSERT_EQ(pcd_replay_device_missing(rp, b3), 0);
}

int main(void) {
  char dir[] = "/tmp/pcache-replay-txn.XXXXXX";
  static pcd_server srv; /* no writer, no loop: the jobs run here */
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplayClaim claim = PCACHEPB__REPLAY_CLAIM__INIT;
  pcd_job *job;
  ASSERT_TRUE(mkdtemp(dir) != NULL);
  make_store(dir);
  ASSERT_OK(pcd_replay_new(&srv, &rp));
  rp->running = 1; /* the replayer is this process (claim_job) */
  rp->pid = (uint32_t)getpid();

  /* A client names the new key: the replay is planned and loaded, unless
   * the transaction aborts. */
  job = new_job(PCD_JOB_REPLAY_START);
  memcpy(job->device_key, new_key, PCACHE_DEVKEY_SIZE);
  snprintf(job->app, sizeof job->app, "game");
  run_job(job, 0);
  ASSERT_EQ(rp->st.active, 0);
  ASSERT_EQ(rp->st.boost, 0);
  ASSERT_EQ(rp->st.have_last_new_key, 0);
  ASSERT_EQ(record_state(), PCACHE_ENOT_FOUND);
  run_job(job, 1); /* the writer's retry */
  ASSERT_EQ(rp->st.active, 1);
  ASSERT_EQ(rp->st.boost, 1);
  ASSERT_TRUE(memcmp(rp->st.rec.new_key, new_key, PCACHE_DEVKEY_SIZE) == 0);
  ASSERT_EQ(record_state(), PCD_REPLAY_PENDING);
  pcd_job_free(job);

  /* The replayer's claim finds nothing left (the old key has no entry
   * records): the replay finishes, but only with its transaction. */
  job = claim_job(&req, &claim);
  run_job(job, 0);
  ASSERT_EQ(rp->st.finished_now, 0);
  ASSERT_EQ(rp->st.rec.state, PCD_REPLAY_PENDING);
  ASSERT_EQ(rp->st.boost, 1);
  ASSERT_EQ(record_state(), PCD_REPLAY_PENDING);
  run_job(job, 1);
  ASSERT_EQ(rp->st.finished_now, 1);
  ASSERT_EQ(rp->st.rec.state, PCD_REPLAY_FINISHED);
  ASSERT_EQ(record_state(), PCD_REPLAY_FINISHED);
  ASSERT_TRUE(job->resp.replay_claim->finished);
  job->req = NULL; /* the request is on the stack */
  pcd_job_free(job);

  /* A bad record queued by the supervisor leaves the queue only when the
   * transaction that writes it commits. */
  pthread_mutex_lock(&rp->lock);
  {
    pcache__hash h;
    memset(h.bytes, 0xab, sizeof h.bytes);
    pcd_replay_queue_bad(rp, &h, "crashed (test)");
  }
  pthread_mutex_unlock(&rp->lock);
  ASSERT_EQ(rp->st.n_pending_bad, 1);
  job = new_job(PCD_JOB_REPLAY_SYNC);
  run_job(job, 0);
  ASSERT_EQ(rp->st.n_pending_bad, 1);
  ASSERT_EQ(rp->st.active, 1); /* the eviction of the old key went back too */
  run_job(job, 1);
  ASSERT_EQ(rp->st.n_pending_bad, 0);
  ASSERT_EQ(rp->st.active, 0);
  pcd_job_free(job);

  side_by_side();
  waiting_behind();
  gone_build_gives_way();

  pcd_replay_free(rp);
  pcd_store_close(store);
  {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ASSERT_EQ(system(cmd), 0);
  }
  return 0;
}
