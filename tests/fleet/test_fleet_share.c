/* Two machines of a fleet, as two pcached with separate stores sharing one
 * real redis-server. The app's cold run against A compiles and uploads
 * every pipeline, and A pushes them to Redis. Against B, with an empty
 * store, the app's first run compiles nothing: its prefetch brings every
 * blob from the fleet through B. Against C, also empty, a run without
 * prefetch does the same through one Get per pipeline. Neither B nor C
 * pushes back what it learned from the fleet. Each signs with its own key
 * and trusts all three (docs/fleet.md "Who can do what"). */
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <time.h>

#include "client_util.h"
#include "fleet_app.h"
#include "harness.h"
#include "redis_util.h"
#include "test.h"
#include "vk.h"

#define N_PIPELINES FLEET_APP_PIPELINES

/* The fleet counters of the daemon at $PCACHE_SOCKET. */
static Pcachepb__RemoteStats remote_of(void) {
  Pcachepb__Response *resp = util_stats();
  Pcachepb__RemoteStats m;
  ASSERT_TRUE(resp->stats->remote != NULL);
  m = *resp->stats->remote;
  m.url = m.state = m.last_error = NULL; /* freed with resp */
  pcache__response_free(resp);
  return m;
}

static test_fleet_key keys[3];
static char trusted[400];

/* Starts a daemon of the fleet, signing with keys[signer]; test_env_init
 * points $PCACHE_SOCKET (this process's and the runs') at it. */
static void start(test_env *env, const char *name, const test_redis *rs, int signer) {
  fleet_member_start(env, name, rs, keys[signer].key, trusted, 0);
  for (int i = 0; i < 500; i++) {
    Pcachepb__Response *resp = util_stats();
    int up = resp->stats->remote && strcmp(resp->stats->remote->state, "up") == 0;
    pcache__response_free(resp);
    if (up)
      return;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  test_dump_daemon_log(env);
  abort();
}

int main(int argc, char **argv) {
  test_env root, a, b, c;
  test_redis rs = {0};
  if (argc > 1) {
    fleet_app_run(strcmp(argv[1], "cold") == 0);
    return 0;
  }
  fleet_begin(&root, "fleet-share", &rs, keys, 3);
  snprintf(trusted, sizeof trusted, "%s/trusted", root.root);
  fleet_trust_file(trusted, keys, 3);

  start(&a, "fleet-share-a", &rs, 0);
  util_run_self(argv[0], "cold");
  /* Every pipeline pushed (and the app's snapshot, when it made one). */
  for (int i = 0; i < 500 && remote_of().pushed < N_PIPELINES; i++)
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  ASSERT_GE(remote_of().pushed, N_PIPELINES);
  ASSERT_EQ(remote_of().refused, 0);

  start(&b, "fleet-share-b", &rs, 1);
  ASSERT_EQ(util_count_entries(), 0);
  util_run_self(argv[0], "fleet");
  ASSERT_EQ(util_count_entries(), N_PIPELINES);
  /* Every entry, and the app's snapshot when A's run made one. */
  ASSERT_GE(remote_of().stored, N_PIPELINES);
  ASSERT_LE(remote_of().stored, N_PIPELINES + 1);
  ASSERT_EQ(remote_of().refused, 0);
  ASSERT_EQ(remote_of().pushed, 0);

  start(&c, "fleet-share-c", &rs, 2);
  setenv("PCACHE_NO_PREFETCH", "1", 1);
  util_run_self(argv[0], "fleet");
  unsetenv("PCACHE_NO_PREFETCH");
  ASSERT_EQ(util_count_entries(), N_PIPELINES);
  ASSERT_EQ(remote_of().stored, N_PIPELINES);
  /* At most the snapshot C's client made at exit (without a prefetch it
   * had none from the fleet): no entry goes back. */
  ASSERT_LE(remote_of().pushed, 1);
  {
    redisContext *rc = redis_connect(&rs);
    ASSERT_EQ(redis_count_keys(rc, "pcache:e:*"), N_PIPELINES);
    redisFree(rc);
  }

  test_env_cleanup(&c);
  test_env_cleanup(&b);
  test_env_cleanup(&a);
  redis_kill(&rs);
  test_env_cleanup(&root);
  return 0;
}
