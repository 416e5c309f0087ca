/* Large values through the fleet (issue 30, A2), against a real
 * redis-server and real pcached, with no attacker: a trusted writer's app
 * has 64 entries of 1 MiB each (legal: --max-blob is 64 MiB).
 *
 * - A fresh member, whose Prefetch deadline is shorter than reading them
 *   takes, stores all of them within a few Prefetches, and its link to Redis is never dropped: the
 *   fetch is bounded in bytes per MGET, values that come after the
 *   Prefetch was answered are stored all the same, and a reply that keeps
 *   arriving is not a stall. Before, 64 keys went in one MGET: a 64 MiB
 *   reply that could not be read before the Prefetch's deadline, thrown
 *   away, and the link dropped as stalled, at every Prefetch (0 stored).
 * - The member then serves them, byte for byte.
 * - Another fresh member's Gets of 32 of them store them the same way. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/hash.h"
#include "proto/rpc.h"
#include "fleet_wire.h"
#include "redis_util.h"
#include "test.h"
#include "wire.h"

#define N_ITEMS 64
#define BLOB_SIZE (1u << 20)
#define N_GET 32
#define APP "large"

/* What env stores once the fleet's values stop arriving: the entry count
 * once it has stayed the same for 500 ms (30 s at most). */
static uint64_t settled(const test_env *env) {
  uint64_t last = fleet_view(env, APP).entries;
  for (int same = 0, i = 0; same < 50 && i < 3000; i++) {
    uint64_t now;
    fleet_sleep_ms(10);
    now = fleet_view(env, APP).entries;
    same = now == last ? same + 1 : 0;
    last = now;
  }
  return last;
}

/* Asks env up to 6 times, each time once the last ask's values stopped
 * arriving, until it stores want entries: a Prefetch of the app (n 0) or
 * a Get of n hashes. Fails unless it does, and without a reconnect. */
static void fill(test_env *env, const pcache__devkey *dev, const pcache__hash *hashes, size_t n,
                 uint64_t want) {
  remote_view v;
  wire_reply r;
  for (int asks = 1; asks <= 6 && fleet_view(env, APP).entries < want; asks++) {
    int fd = wire_open(env, APP);
    if (n)
      wire_get(fd, dev, hashes, n, &r);
    else
      wire_prefetch(fd, dev, 0, 0, 0, &r);
    wire_reply_free(&r);
    close(fd);
    fprintf(stderr, "%s %d: member stores %llu of %llu entries\n", n ? "get" : "prefetch", asks,
            (unsigned long long)settled(env), (unsigned long long)want);
  }
  v = fleet_view(env, APP);
  if (v.entries != want || v.reconnects != 0)
    test_dump_daemon_log(env);
  ASSERT_EQ(v.entries, want);
  ASSERT_EQ(v.stored, want);
  ASSERT_EQ(v.refused, 0);
  ASSERT_EQ(v.reconnects, 0);
  ASSERT_EQ(strcmp(v.state, "up"), 0);
}

/* A member that only reads, with --remote-timeout 5: a Prefetch's fleet
 * part has 50 ms, a Get's 5 ms, a silent link 250 ms. Reading 64 MiB
 * takes longer than 50 ms on any machine; it took longer than the
 * default's 200 ms on a loaded one (the hostile run), not on an idle one,
 * so the short deadline is what makes the test not depend on the
 * machine's speed. */
static void reader(test_env *env, const char *name, const char *url, const char *trusted) {
  const char *args[] = {"--remote", url, "--remote-trusted-keys", trusted, "--remote-timeout",
                        "5",        NULL};
  test_env_init(env, name);
  test_daemon_start(env, args);
  wire_guard(env);
  fleet_wait_state(env, APP, "up");
}

int main(void) {
  test_redis rs = {0};
  test_env root, w, m, g;
  test_fleet_key k;
  pcache__devkey dev;
  static wire_item items[N_ITEMS];
  pcache__hash hashes[N_ITEMS];
  char dir[400], trusted[400];
  wire_reply r;
  int fd;

  redis_require();
  signal(SIGPIPE, SIG_IGN);
  test_env_init(&root, "fleet-large");
  snprintf(dir, sizeof dir, "%s/redis", root.root);
  redis_start(&rs, dir);
  snprintf(dir, sizeof dir, "%s/keys", root.root);
  fleet_keygen(&k, dir);
  snprintf(trusted, sizeof trusted, "%s/trusted", root.root);
  fleet_trust_file(trusted, &k, 1);

  /* The writer stores and pushes 64 entries of 1 MiB. */
  {
    const char *args[] = {"--remote",
                          rs.url,
                          "--remote-timeout",
                          "2000",
                          "--remote-signing-key",
                          k.key,
                          "--remote-trusted-keys",
                          trusted,
                          NULL};
    test_env_init(&w, "large-w");
    test_daemon_start(&w, args);
    wire_guard(&w);
    fleet_wait_state(&w, APP, "up");
  }
  wire_devkey(1, &dev);
  for (size_t i = 0; i < N_ITEMS; i++) {
    wire_item_make(&items[i], &dev, 7000 + i, BLOB_SIZE);
    hashes[i] = items[i].hash;
  }
  for (size_t i = 0; i < N_ITEMS; i += 8) {
    fd = wire_open(&w, APP);
    wire_put(fd, &dev, items + i, 8, &r);
    ASSERT_EQ(r.resp->put->stored, 8);
    wire_reply_free(&r);
    close(fd);
  }
  for (int i = 0; i < 3000 && fleet_view(&w, APP).pushed < N_ITEMS; i++)
    fleet_sleep_ms(10);
  ASSERT_EQ(fleet_view(&w, APP).pushed, N_ITEMS);

  /* A fresh member's Prefetches store them all, the link kept. */
  reader(&m, "large-m", rs.url, trusted);
  fill(&m, &dev, NULL, 0, N_ITEMS);

  /* Served from its store, byte for byte. */
  for (size_t i = 0; i < N_ITEMS; i += 16) {
    size_t size;
    const uint8_t *data;
    fd = wire_open(&m, APP);
    wire_get(fd, &dev, &hashes[i], 1, &r);
    ASSERT_EQ(r.resp->get->n_blobs, 1);
    data = wire_blob_data(&r, r.resp->get->blobs[0], &size);
    ASSERT_EQ(size, items[i].item.blob.len);
    ASSERT_EQ(memcmp(data, items[i].item.blob.data, size), 0);
    wire_reply_free(&r);
    close(fd);
  }

  /* Gets read through the same way: 32 misses of 1 MiB in one Get. */
  reader(&g, "large-g", rs.url, trusted);
  fill(&g, &dev, hashes, N_GET, N_GET);

  for (size_t i = 0; i < N_ITEMS; i++)
    wire_item_free(&items[i]);
  test_env_cleanup(&g);
  test_env_cleanup(&m);
  test_env_cleanup(&w);
  redis_kill(&rs);
  test_env_cleanup(&root);
  return 0;
}
