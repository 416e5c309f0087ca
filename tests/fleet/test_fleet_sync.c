/* The fleet sync (docs/fleet.md "Sync"), two machines of a fleet as two
 * pcached with separate stores sharing one real redis-server. A's app
 * compiles and uploads every pipeline, A pushes them. B starts after,
 * probes its drivers (lavapipe) and, with no client at all, pulls and
 * stages what the fleet has for that device: its store ends up holding
 * every entry under the key a client on B names, and the app's first run
 * on B compiles nothing and gets every pipeline from B's daemon. Then:
 * `pcachectl fleet sync` says what a sync did (nothing left to list);
 * a fleet with more apps than a sync lists stops at the limit; a member
 * that does not trust A's key stores nothing and counts the refusals.
 * The program name goes with the entries (x:APP, docs/fleet.md): B builds
 * them under A's app's name (this test binary's), and a member that finds
 * a name that is no file name there (E) refuses it and builds them as
 * pcache-replay. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client_util.h"
#include "fleet_app.h"
#include "common/clock.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "harness.h"
#include "proto/transport.h"
#include "redis_util.h"
#include "test.h"

#define N_PIPELINES FLEET_APP_PIPELINES
/* remote_sync.c's SYNC_MAX_APPS, as docs/fleet.md states it. */
#define MAX_APPS 256

static test_fleet_key keys[3];
static char trust_ab[400], trust_c[400];

/* The daemon at $PCACHE_SOCKET's fleet state; free with
 * pcache__response_free(resp). */
static const Pcachepb__RemoteStats *remote_of(Pcachepb__Response **resp) {
  *resp = util_stats();
  ASSERT_TRUE((*resp)->stats->remote != NULL);
  return (*resp)->stats->remote;
}

/* Starts a fleet member signing with keys[signer], trusting what file
 * lists; probe: whether it probes its drivers at start (and so syncs). */
static void start(test_env *env, const char *name, const test_redis *rs, int signer,
                  const char *file, int probe) {
  fleet_member_start(env, name, rs, keys[signer].key, file, probe);
}

/* Waits (30 s at most) for the member's first sync to end; returns its
 * result (the response is freed by the caller). */
static const Pcachepb__RemoteStats *wait_sync(const test_env *env, Pcachepb__Response **resp) {
  uint64_t end = util_now_ms() + 30000;
  for (;;) {
    const Pcachepb__RemoteStats *m = remote_of(resp);
    if (strcmp(m->sync_state, "done") == 0 || strcmp(m->sync_state, "failed") == 0) {
      if (strcmp(m->sync_state, "done") != 0) {
        fprintf(stderr, "sync failed: %s\n", m->sync_error);
        test_dump_daemon_log(env);
      }
      ASSERT_STREQ(m->sync_state, "done");
      ASSERT_TRUE(m->sync != NULL);
      return m;
    }
    pcache__response_free(*resp);
    if (util_now_ms() > end)
      test_dump_daemon_log(env);
    ASSERT_LT(util_now_ms(), end);
    fleet_sleep_ms(20);
  }
}

/* Entries of the daemon at $PCACHE_SOCKET under device key, and under
 * any staged key (built by the replayer later). */
static void count_by_key(const uint8_t *key, size_t *ret_entries, size_t *ret_staged) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache__transport *t;
  pcache__reply reply = {0};
  const Pcachepb__ListReply *l;
  list.entries = 1;
  request.body_case = PCACHEPB__REQUEST__BODY_LIST;
  request.list = &list;
  ASSERT_OK(pcache__transport_open(getenv("PCACHE_SOCKET"), "fleet-sync-test", 5000, &t, NULL));
  ASSERT_OK(pcache__transport_rpc(t, &request, PCACHEPB__RESPONSE__BODY_LIST,
                                  pcache__mono_ms() + 5000, &reply));
  pcache__transport_close(t);
  l = reply.response->list;
  *ret_entries = *ret_staged = 0;
  for (size_t i = 0; i < l->n_entries; i++) {
    pcache__devkey k;
    ASSERT_EQ(l->entries[i]->device_key.len, PCACHE_DEVKEY_SIZE);
    memcpy(k.bytes, l->entries[i]->device_key.data, PCACHE_DEVKEY_SIZE);
    if (memcmp(k.bytes, key, PCACHE_DEVKEY_SIZE) == 0)
      ++*ret_entries;
    else if (pcache__devkey_is_staged(&k))
      ++*ret_staged;
  }
  pcache__reply_release(&reply);
}

/* Whether the member's log has needle. */
static int log_has(const test_env *env, const char *needle) {
  char line[2048];
  int found = 0;
  FILE *f = fopen(env->log_path, "r");
  ASSERT_TRUE(f != NULL);
  while (!found && fgets(line, sizeof line, f))
    found = strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

/* Until the member's log has needle (the replayer's lines are relayed as
 * they come), 10 s at most. */
static void wait_log(const test_env *env, const char *needle) {
  uint64_t end = util_now_ms() + 10000;
  while (!log_has(env, needle)) {
    if (util_now_ms() > end)
      test_dump_daemon_log(env);
    ASSERT_LT(util_now_ms(), end);
    fleet_sleep_ms(20);
  }
}

/* Until the member at $PCACHE_SOCKET holds all N_PIPELINES under key,
 * built, and nothing staged. */
static void wait_built(const test_env *env, const uint8_t *key) {
  uint64_t end = util_now_ms() + 30000;
  size_t entries, staged;
  for (;;) {
    count_by_key(key, &entries, &staged);
    if (entries == N_PIPELINES && staged == 0)
      break;
    if (util_now_ms() > end)
      test_dump_daemon_log(env);
    ASSERT_LT(util_now_ms(), end);
    fleet_sleep_ms(50);
  }
}

/* `pcachectl fleet sync [--json]` against $PCACHE_SOCKET: its exit status,
 * what it printed in out. */
static int ctl_sync(const test_env *env, const char *flags, char *out, size_t size) {
  char path[400];
  FILE *f;
  size_t n;
  int st;
  snprintf(path, sizeof path, "%s/ctl.out", env->root);
  st = fleet_sh("'%s' %s fleet sync > '%s' 2>&1", PCACHECTL_PATH, flags, path);
  ASSERT_TRUE((f = fopen(path, "r")) != NULL);
  n = fread(out, 1, size - 1, f);
  out[n] = '\0';
  fclose(f);
  return st;
}

int main(int argc, char **argv) {
  test_env root, a, b, d, e;
  test_redis rs = {0};
  Pcachepb__Response *resp;
  const Pcachepb__RemoteStats *m;
  uint8_t key[PCACHE_DEVKEY_SIZE];
  char out[4096], hex[65];
  const char *self = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
  struct stat st;
  size_t entries, staged;
  uint64_t end;
  if (argc > 1) {
    fleet_app_run(strcmp(argv[1], "cold") == 0);
    return 0;
  }
  fleet_begin(&root, "fleet-sync", &rs, keys, 3);
  snprintf(trust_ab, sizeof trust_ab, "%s/trusted-ab", root.root);
  fleet_trust_file(trust_ab, keys, 2);
  snprintf(trust_c, sizeof trust_c, "%s/trusted-c", root.root);
  fleet_trust_file(trust_c, keys + 2, 1);

  /* A: no probe, so no sync of its own; its app uploads, A pushes. */
  start(&a, "fleet-sync-a", &rs, 0, trust_ab, 0);
  util_run_self(argv[0], "cold");
  end = util_now_ms() + 10000;
  while ((m = remote_of(&resp))->pushed < N_PIPELINES) {
    pcache__response_free(resp);
    ASSERT_LT(util_now_ms(), end);
    fleet_sleep_ms(10);
  }
  pcache__response_free(resp);
  {
    redisContext *rc = redis_connect(&rs);
    const char *argv_keys[] = {"KEYS", "pcache:a:*"};
    redisReply *r = redis_cmd(rc, 2, argv_keys, NULL);
    ASSERT_EQ(r->type, REDIS_REPLY_ARRAY);
    ASSERT_EQ(r->elements, 1); /* one app's index, on lavapipe's key */
    ASSERT_TRUE(r->element[0]->len > 9 + 64);
    memcpy(hex, r->element[0]->str + 9, 64);
    hex[64] = '\0';
    ASSERT_OK(pcache__unhex(hex, key, PCACHE_DEVKEY_SIZE));
    freeReplyObject(r);
    /* The program the app ran as, beside its entries. */
    r = redis_get(rc, "pcache:x:pcache-client-test");
    ASSERT_EQ(r->type, REDIS_REPLY_STRING);
    ASSERT_STREQ(r->str, self);
    freeReplyObject(r);
    redisFree(rc);
  }

  /* B: started after A pushed; no client of B's runs until its sync is
   * over and every entry it staged is built. */
  start(&b, "fleet-sync-b", &rs, 1, trust_ab, 1);
  m = wait_sync(&b, &resp);
  ASSERT_EQ(m->sync->devices, 1);
  ASSERT_EQ(m->sync->apps, 1);
  ASSERT_EQ(m->sync->listed, N_PIPELINES);
  ASSERT_EQ(m->sync->fetched, N_PIPELINES);
  ASSERT_EQ(m->sync->staged, N_PIPELINES);
  ASSERT_EQ(m->sync->refused, 0);
  ASSERT_EQ(m->refused, 0);
  pcache__response_free(resp);
  wait_built(&b, key);
  /* Built under A's app's program name, which no client of B's has
   * named yet: the fleet's. */
  snprintf(out, sizeof out, "replay: runs as '%s'", self);
  wait_log(&b, out);
  ASSERT_TRUE(!log_has(&b, "replay: runs as 'pcache-replay'"));
  snprintf(out, sizeof out, "%s/replayers/%s/%s", b.data_dir, self, self);
  ASSERT_EQ(stat(out, &st), 0);
  util_run_self(argv[0], "warm");
  /* Learned from the fleet: no entry is pushed back; at most the snapshot
   * B's client made at exit. */
  ASSERT_LE(remote_of(&resp)->pushed, 1);
  pcache__response_free(resp);

  /* On demand: the reply is the daemon's; nothing is left to list. */
  ASSERT_EQ(ctl_sync(&b, "", out, sizeof out), 0);
  ASSERT_TRUE(strstr(out, "fleet sync:") != NULL);
  ASSERT_TRUE(strstr(out, "1 device, 1 app, 0 hashes listed, 0 fetched, 0 staged, 0 refused") !=
              NULL);

  /* E finds a program name in Redis that is no file name: refused, and
   * the app's pipelines are built as pcache-replay, all of them. */
  {
    redisContext *rc = redis_connect(&rs);
    redis_set(rc, "pcache:x:pcache-client-test", "../../bin/sh", 12);
    redisFree(rc);
  }
  start(&e, "fleet-sync-e", &rs, 1, trust_ab, 1);
  m = wait_sync(&e, &resp);
  ASSERT_EQ(m->sync->staged, N_PIPELINES);
  pcache__response_free(resp);
  wait_built(&e, key);
  ASSERT_TRUE(log_has(&e, "is not a file name"));
  wait_log(&e, "replay: runs as 'pcache-replay'");
  snprintf(out, sizeof out, "%s/replayers", e.data_dir);
  ASSERT_TRUE(stat(out, &st) < 0);
  test_env_cleanup(&e);

  /* D trusts only key c: A's values are refused, each counted, and
   * nothing is stored (before the apps below, which would put A's app
   * past D's listing). */
  start(&d, "fleet-sync-d", &rs, 2, trust_c, 1);
  m = wait_sync(&d, &resp);
  ASSERT_EQ(m->sync->staged, 0);
  ASSERT_GE(m->sync->refused, N_PIPELINES);
  ASSERT_GE(m->refused_untrusted, N_PIPELINES);
  pcache__response_free(resp);
  ASSERT_EQ(util_count_entries(), 0);

  setenv("PCACHE_SOCKET", b.socket_path, 1);

  /* More apps than a sync lists: it stops at the limit. Each index holds
   * a hash that has no value in Redis, so only the listing costs. */
  {
    redisContext *rc = redis_connect(&rs);
    for (int i = 0; i < MAX_APPS + 40; i++) {
      char k[200];
      const char *sadd[] = {"SADD", k, "00112233445566778899aabbccddeeff"};
      snprintf(k, sizeof k, "pcache:a:%s:extra-app-%03d", hex, i);
      freeReplyObject(redis_cmd(rc, 3, sadd, NULL));
    }
    redisFree(rc);
  }
  ASSERT_EQ(ctl_sync(&b, "--json", out, sizeof out), 0);
  ASSERT_TRUE(strstr(out, "\"apps\":256") != NULL || strstr(out, "\"apps\": 256") != NULL);
  ASSERT_TRUE(strstr(out, "\"staged\":0") != NULL || strstr(out, "\"staged\": 0") != NULL);
  m = remote_of(&resp);
  ASSERT_EQ(m->sync->apps, MAX_APPS);
  ASSERT_EQ(m->sync->refused, 0);
  pcache__response_free(resp);
  count_by_key(key, &entries, &staged);
  ASSERT_EQ(entries, N_PIPELINES);

  test_env_cleanup(&d);
  test_env_cleanup(&b);
  test_env_cleanup(&a);
  redis_kill(&rs);
  test_env_cleanup(&root);
  return 0;
}
