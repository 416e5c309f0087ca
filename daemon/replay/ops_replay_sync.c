/* The sync job, which the supervisor queues (replay_supervise.c): writes
 * the bad records it queued, evicts a finished replay's old key (unless a
 * client used it meanwhile; a staged key's built and bad items), drops a
 * replay whose device is not here, and loads the next pending one. */
#include "ops_replay.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/log.h"

static int latest_use(void *ctx, const uint8_t lru_key[PCD_LRU_KEY_SIZE]) {
  uint64_t t = 0;
  for (int i = 0; i < 8; i++)
    t = t << 8 | lru_key[i];
  *(uint64_t *)ctx = t;
  return 1;
}

struct evict_ctx {
  pcd_txn *txn;
  const pcd_replay_record *rec;
  int staged;
  pcd_key_list keys;
  uint64_t left; /* staged entries neither built nor bad */
};

/* A staged entry is done with once the new key has it or it is recorded
 * bad; one staged while the replay ran, which its walk may have passed,
 * stays for the next round. */
static int collect_entry(void *ctx, const pcd_entry *e) {
  struct evict_ctx *x = ctx;
  if (x->staged) {
    uint8_t k[PCD_ENTRY_KEY_SIZE];
    pcache__hash h;
    pcd_entry other;
    int r;
    memcpy(h.bytes, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
    pcd_replay_entry_key(k, x->rec->new_key, &h);
    r = pcd_entry_get(x->txn, k, &other);
    if (r == PCACHE_ENOT_FOUND)
      r = pcd_replay_bad_get(x->txn, x->rec->old_key, x->rec->new_key, &h);
    if (r == PCACHE_ENOT_FOUND) {
      x->left++;
      return 0;
    }
    if (r < 0)
      return r;
  }
  return pcd_key_list_add(&x->keys, e->key);
}

/* The old key's entries go once its replay is done, unless a client
 * used one since the replay began: then another driver build still runs
 * them (two installed side by side), and they stay for LRU to judge. A
 * staged key's entries are no client's to use: those built or bad go,
 * and a replay is planned again for any left. */
static int evict_old(pcd_txn *txn, const pcd_replay_record *rec) {
  pcache__devkey old;
  struct evict_ctx x = {.txn = txn, .rec = rec};
  pcd_key_list *keys = &x.keys;
  pcd_snap_list snaps = {0};
  uint64_t last = 0, n = 0;
  int r;
  memcpy(old.bytes, rec->old_key, PCACHE_DEVKEY_SIZE);
  x.staged = pcache__devkey_is_staged(&old);
  if (!x.staged) {
    if ((r = pcd_lru_newest_before(txn, rec->old_key, NULL, latest_use, &last)) < 0)
      return r;
    if (last > rec->created_us) {
      log_info("replay: the old key was used during its replay; leaving its entries to LRU");
      return 0;
    }
  }
  r = pcd_entries_foreach(txn, rec->old_key, collect_entry, &x);
  for (size_t i = 0; r >= 0 && !keys->oom && i < keys->keys.n; i++, n++)
    r = pcd_entry_delete(txn, keys->keys.items[i].bytes, NULL);
  if (r >= 0 && !keys->oom)
    r = pcd_snapshots_foreach(txn, rec->old_key, pcd_snap_list_visit, &snaps);
  for (size_t i = 0; r >= 0 && i < snaps.v.n; i++)
    r = pcd_snapshot_delete(txn, rec->old_key, snaps.v.items[i].app, NULL);
  if (r >= 0 && !keys->oom)
    r = pcd_device_forget(txn, rec->old_key);
  if (r >= 0 && !keys->oom)
    log_info("replay: evicted the old key's %llu entries", (unsigned long long)n);
  if (r >= 0 && !keys->oom && x.left) {
    log_info("replay: %llu staged items came during the build; building them next",
             (unsigned long long)x.left);
    r = pcd_replay_plan(txn, rec->old_key, rec->new_key, 1);
  }
  pcache_vec_free(&keys->keys);
  pcache_vec_free(&snaps.v);
  return keys->oom ? -ENOMEM : (r == PCACHE_ENOT_FOUND ? 0 : r < 0 ? r : 0);
}

static int op_sync(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  pcd_replay *rp = pcd_replay_of(job);
  int r;
  (void)cfg;
  if (!rp)
    return 0;
  pcd_replay_txn_enter(rp);
  r = pcd_replay_write_bad(rp, txn);
  if (r >= 0 && rp->st.active && pcd_replay_device_missing(rp, rp->st.rec.new_key)) {
    /* Its device is gone (replay_supervise.c): it stays recorded, pending,
     * and the next one is loaded; unless another build of its device,
     * one that is here, was named while it was under way: that build's
     * replays replace it as they replace the pending ones
     * (ops_replay_start.c). The key named last may be this gone one
     * itself (a client staged for it), whose kin must then stay. */
    uint8_t gone[PCACHE_DEVKEY_SIZE];
    memcpy(gone, rp->st.rec.new_key, PCACHE_DEVKEY_SIZE);
    pcd_replay_unload(rp);
    if (rp->st.have_last_new_key && memcmp(rp->st.last_new_key, gone, PCACHE_DEVKEY_SIZE) != 0 &&
        !pcd_replay_device_missing(rp, rp->st.last_new_key))
      r = pcd_replay_retire_obsolete(txn, rp, rp->st.last_new_key, &job->arena);
  }
  if (r >= 0 && rp->st.active && rp->st.finished_now) {
    pcd_replay_record rec = rp->st.rec;
    /* A replay that built none of its items (a driver that refuses
     * every build, or a binary device whose capture gives no binaries)
     * leaves the old key's entries, descriptions and SPIR-V with them, to
     * LRU: evicted, nothing would be left to build from once the driver
     * is fixed. */
    if (rp->st.total && !rp->st.done) {
      log_warn("replay: none of the %llu items was built; the old key's entries stay "
               "('pcachectl status' says why each failed)",
               (unsigned long long)rp->st.total);
      pcd_replay_unload(rp);
    } else if ((r = evict_old(txn, &rec)) >= 0) {
      pcd_replay_unload(rp);
    }
  }
  if (r >= 0)
    r = pcd_replay_load_next(rp, txn);
  if (r >= 0)
    r = pcd_replay_plan_exe(rp, txn);
  return r < 0 ? r : 0;
}

static void sync_committed(pcd_job *job) {
  pcd_replay *rp = pcd_replay_committed_lock(job);
  if (!rp)
    return;
  if (rp->st.active)
    pcd_replay_wake(rp, 1, 0);
  pthread_mutex_unlock(&rp->lock);
}

const pcd_job_ops pcd_job_replay_sync = {.name = "replay_sync",
                                         .run = op_sync,
                                         .committed = sync_committed,
                                         .aborted = pcd_replay_job_aborted};
