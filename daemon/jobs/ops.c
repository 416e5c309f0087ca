/* What the write jobs share (ops.h), and the batches the I/O threads
 * queue: the hits they counted (touch), the entries whose blobs failed
 * their checksum as they were read (drop), and the program name an app
 * runs as (app_exe: replay_exe.c). */
#include "ops.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

int pcd_key_list_add(pcd_key_list *l, const uint8_t *key) {
  pcd_entry_key k;
  memcpy(k.bytes, key, PCD_ENTRY_KEY_SIZE);
  if (pcache_vec_push(&l->keys, k) < 0) {
    l->oom = 1;
    return -ENOMEM;
  }
  return 0;
}

int pcd_snap_list_visit(void *ctx, const pcd_snapshot *s) {
  pcd_snap_list *l = ctx;
  if (l->app && strcmp(s->app, l->app) != 0)
    return 0;
  return pcache_vec_push(&l->v, *s);
}

/* Purge, Verify, Export and Import walk the whole store or archive. */
uint64_t pcd_job_bytes_walk(const pcd_job *job) { return PCD_TRIM_BYTES; }

static int op_touch(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  for (size_t i = 0; i < job->n_touches; i++) {
    int r = pcd_entry_touch(txn, job->touches[i].key, job->touches[i].last_used_us,
                            job->touches[i].hits);
    if (r < 0)
      return r;
  }
  return 0;
}

static int op_drop(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  for (size_t i = 0; i < job->n_touches; i++) {
    int r = pcd_entry_delete(txn, job->touches[i].key, NULL);
    if (r < 0 && r != PCACHE_ENOT_FOUND)
      return r;
  }
  return 0;
}

/* A name that fails the check was never queued (replay_exe.c); one that
 * does costs a record of a few bytes, once a run per app. */
static int op_app_exe(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  int r = pcd_app_exe_put(txn, job->app, job->exe, pcd_now_us() / 1000000);
  return r == -EINVAL ? 0 : r;
}

const pcd_job_ops pcd_job_touch = {.name = "touch", .run = op_touch};
const pcd_job_ops pcd_job_drop = {.name = "drop", .run = op_drop};
const pcd_job_ops pcd_job_app_exe = {.name = "app_exe", .run = op_app_exe};
