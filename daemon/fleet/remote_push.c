/* Write-back: values the writer packed after its commits (remote_pack.c)
 * go to Redis in the background, pipelined on the one connection, with
 * at most PUSH_IN_FLIGHT bytes unanswered so that a slow Redis fills the
 * bounded queue (remote.c drops and counts past it) rather than hiredis's
 * unbounded output buffer. Each value is signed here, on the loop, just
 * before it is written (remote_trust.c), off the writer's thread and its
 * transactions; a daemon without a signing key never gets this far
 * (dispatch.c packs nothing for it, remote.c would drop it). An entry is
 * SET under its key and its hash added to its (device, app) index; a
 * snapshot is SET under its key; the program name an entry's app runs as,
 * when it comes with one, is SET under x:APP, unsigned (docs/fleet.md);
 * with --remote-ttl, each key written gets that expiry. */
#include "remote_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

#define PUSH_IN_FLIGHT (16u << 20)

static void on_set(pcd_remote *r, redisReply *reply, void *privdata) {
  uint64_t size = (uint64_t)(uintptr_t)privdata;
  uint64_t n;
  r->push_bytes_in_flight -= size;
  if (!reply) {
    /* The connection is going: what is queued waits for the next one. */
    atomic_fetch_add(&r->stats->fleet_push_dropped, 1);
    return;
  }
  if (reply->type == REDIS_REPLY_ERROR) {
    /* The 1st, 2nd, 4th, 8th... refusal: a full Redis refuses every
     * write, and one line per value would drown the log. */
    n = atomic_fetch_add(&r->stats->fleet_push_errors, 1) + 1;
    if ((n & (n - 1)) == 0)
      log_warn("remote: %s refused a write (%llu so far): %s; see docs/fleet.md on maxmemory",
               pcd_remote_url(r), (unsigned long long)n, reply->str);
  } else {
    atomic_fetch_add(&r->stats->fleet_pushed, 1);
    pcd_remote_worked(r);
  }
  pcd_remote_push_flush(r);
}

/* Replies of the index and expiry commands: only the SET's are counted. */
static void on_aside(pcd_remote *r, redisReply *reply, void *privdata) {
  (void)r;
  (void)reply;
  (void)privdata;
}

/* Signs p's value for the key it goes under (the key less the prefix:
 * remote_trust.c) and sends its commands; 0 or -EIO. */
static int send_push(pcd_remote *r, pcd_push *p) {
  char key[PCD_FLEET_KEY_MAX], index[PCD_FLEET_KEY_MAX], ttl[24], member[2 * PCACHE_HASH_SIZE + 1];
  const char *argv[5];
  size_t len[5], n, key_len, index_len = 0, prefix_len = strlen(r->config->remote_prefix);
  int ex = r->config->remote_ttl_s > 0;
  snprintf(ttl, sizeof ttl, "%llu", (unsigned long long)r->config->remote_ttl_s);
  if (p->kind == PCD_PUSH_ENTRY) {
    key_len = pcd_fleet_key_entry(key, r->config->remote_prefix, p->device_key, p->state_hash);
    index_len = pcd_fleet_key_index(index, r->config->remote_prefix, p->device_key, p->app);
  } else {
    key_len = pcd_fleet_key_snapshot(key, r->config->remote_prefix, p->device_key, p->app);
  }
  pcd_trust_sign(&r->trust, key + prefix_len, key_len - prefix_len, p->value, p->size);
  argv[0] = "SET", len[0] = 3;
  argv[1] = key, len[1] = key_len;
  argv[2] = (const char *)p->value, len[2] = p->size;
  n = 3;
  if (ex) {
    argv[3] = "EX", len[3] = 2;
    argv[4] = ttl, len[4] = strlen(ttl);
    n = 5;
  }
  if (pcd_remote_command(r, on_set, (void *)(uintptr_t)p->size, (int)n, argv, len) < 0)
    return -EIO;
  r->push_bytes_in_flight += p->size;
  if (p->kind != PCD_PUSH_ENTRY)
    return 0;
  pcache__hex(p->state_hash, PCACHE_HASH_SIZE, member);
  argv[0] = "SADD", len[0] = 4;
  argv[1] = index, len[1] = index_len;
  argv[2] = member, len[2] = 2 * PCACHE_HASH_SIZE;
  (void)pcd_remote_command(r, on_aside, NULL, 3, argv, len);
  if (ex) {
    argv[0] = "EXPIRE", len[0] = 6;
    argv[2] = ttl, len[2] = strlen(ttl);
    (void)pcd_remote_command(r, on_aside, NULL, 3, argv, len);
  }
  if (p->exe[0]) {
    argv[0] = "SET", len[0] = 3;
    argv[1] = index, len[1] = pcd_fleet_key_exe(index, r->config->remote_prefix, p->app);
    argv[2] = p->exe, len[2] = strlen(p->exe);
    n = 3;
    if (ex) {
      argv[3] = "EX", len[3] = 2;
      argv[4] = ttl, len[4] = strlen(ttl);
      n = 5;
    }
    (void)pcd_remote_command(r, on_aside, NULL, (int)n, argv, len);
  }
  return 0;
}

void pcd_remote_push_flush(pcd_remote *r) {
  while (r->ac && atomic_load(&r->state) == PCD_REMOTE_UP &&
         r->push_bytes_in_flight < PUSH_IN_FLIGHT) {
    pcd_push *p;
    pthread_mutex_lock(&r->lock);
    p = pcache_queue_pop(&r->pushes);
    if (p) {
      r->queued--;
      r->queued_bytes -= p->size;
    }
    pthread_mutex_unlock(&r->lock);
    if (!p)
      return;
    if (send_push(r, p) < 0)
      atomic_fetch_add(&r->stats->fleet_push_dropped, 1);
    p->next = NULL;
    pcd_push_free_all(p);
  }
}
