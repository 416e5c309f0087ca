/* Load: 64 clients, each on its own connection, doing a mix of Get,
 * Prefetch, Put, List, Purge and Stats for PCACHE_REL_LOAD_SECONDS (5 s
 * here, 60 s in scripts/reliability.sh --long). Zero protocol errors: every
 * reply arrives, in order, with status 0. Invariants: an entry a client
 * put and has not purged is found by Get with its exact bytes; one it
 * purged is missing. The daemon's memory stays flat: RSS at the end is
 * within a bound of RSS after the warm-up. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rel_util.h"
#include "test.h"

#define CLIENTS 64
#define LIVE_MAX 64

static test_env env;
static pcache__devkey key;
static atomic_int phase; /* 0 warm-up, 1 measured, 2 stop */
static atomic_uint_fast64_t ops[7], errors;
enum { OP_GET, OP_PREFETCH, OP_PUT, OP_LIST, OP_PURGE, OP_STATS, OP_MISS };

typedef struct client {
  int id;
  unsigned seed;
  pcache__hash live[LIVE_MAX];
  uint64_t live_salt[LIVE_MAX];
  size_t n_live;
  uint64_t next_salt;
  pcache__hash gone;
  int have_gone;
} client;

static size_t size_for(uint64_t salt) { return 64 + salt % 3000; }

static void fail(const char *what, int code) {
  atomic_fetch_add(&errors, 1);
  fprintf(stderr, "load: %s: %d (%s)\n", what, code, pcache_err_name(code));
}

static void count(int op) {
  if (atomic_load(&phase) == 1)
    atomic_fetch_add(&ops[op], 1);
}

static void do_get(int fd, client *c) {
  pcache__hash h[9];
  size_t want = c->n_live < 8 ? c->n_live : 8, n = 0, m;
  wire_reply rep;
  int r;
  /* Distinct hashes: the daemon answers each distinct hash once. */
  for (size_t t = 0; n < want && t < 4 * want; t++) {
    pcache__hash pick = c->live[(size_t)rand_r(&c->seed) % c->n_live];
    size_t j = 0;
    while (j < n && memcmp(h[j].bytes, pick.bytes, 16) != 0)
      j++;
    if (j == n)
      h[n++] = pick;
  }
  m = n;
  if (c->have_gone)
    h[m++] = c->gone;
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Get g = PCACHEPB__GET__INIT;
    ProtobufCBinaryData hb[9];
    for (size_t i = 0; i < m; i++)
      hb[i] = (ProtobufCBinaryData){16, h[i].bytes};
    g.device_key = (ProtobufCBinaryData){32, key.bytes};
    g.state_hashes = hb;
    g.n_state_hashes = m;
    req.body_case = PCACHEPB__REQUEST__BODY_GET;
    req.get = &g;
    if ((r = wire_try_call(fd, &req, &rep)) < 0)
      return fail("get transport", r);
  }
  if (rep.resp->status || rep.resp->body_case != PCACHEPB__RESPONSE__BODY_GET) {
    fail("get", rep.resp->status);
  } else {
    /* Every live entry is there (in request order); the purged one is not. */
    if (rep.resp->get->n_blobs != n)
      fail("get: live entry missing", (int)(n - rep.resp->get->n_blobs));
    if (rep.resp->get->n_missing != m - n)
      fail("get: purged entry still served", 0);
    for (size_t i = 0; i < rep.resp->get->n_blobs && i < n; i++) {
      size_t size;
      const Pcachepb__Blob *b = rep.resp->get->blobs[i];
      const uint8_t *data = wire_blob_data(&rep, b, &size);
      if (b->state_hash.len != 16 || memcmp(b->state_hash.data, h[i].bytes, 16) != 0 ||
          pcache__checksum64(data, size) != b->checksum)
        fail("get: wrong blob", 0);
    }
  }
  wire_reply_free(&rep);
  count(OP_GET);
}

static void do_put(int fd, client *c) {
  wire_item it[2];
  int r;
  for (int i = 0; i < 2; i++) {
    uint64_t salt = c->next_salt++;
    rel_item_make(&it[i], &key, ((uint64_t)c->id << 32) | salt, size_for(salt));
  }
  r = rel_put(fd, &key, it, 2);
  if (r != 2) {
    fail("put", r);
  } else {
    for (int i = 0; i < 2; i++) {
      if (c->n_live < LIVE_MAX)
        c->live[c->n_live++] = it[i].hash;
      else
        c->live[(size_t)rand_r(&c->seed) % LIVE_MAX] = it[i].hash;
    }
  }
  for (int i = 0; i < 2; i++)
    wire_item_free(&it[i]);
  count(OP_PUT);
}

static void do_purge(int fd, client *c) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Purge p = PCACHEPB__PURGE__INIT;
  wire_reply rep;
  size_t at;
  int r;
  if (c->n_live < 4)
    return;
  at = (size_t)rand_r(&c->seed) % c->n_live;
  p.selector_case = PCACHEPB__PURGE__SELECTOR_STATE_HASH;
  p.state_hash = (ProtobufCBinaryData){16, c->live[at].bytes};
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = &p;
  if ((r = wire_try_call(fd, &req, &rep)) < 0)
    return fail("purge transport", r);
  if (rep.resp->status || rep.resp->body_case != PCACHEPB__RESPONSE__BODY_PURGE ||
      rep.resp->purge->entries != 1) {
    fail("purge", rep.resp->status);
  } else {
    c->gone = c->live[at];
    c->have_gone = 1;
    c->live[at] = c->live[--c->n_live];
  }
  wire_reply_free(&rep);
  count(OP_PURGE);
}

static void simple(int fd, int op) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  Pcachepb__List l = PCACHEPB__LIST__INIT;
  Pcachepb__Stats s = PCACHEPB__STATS__INIT;
  wire_reply rep;
  int r;
  if (op == OP_PREFETCH) {
    pf.device_key = (ProtobufCBinaryData){32, key.bytes};
    pf.max_entries = 32;
    req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
    req.prefetch = &pf;
  } else if (op == OP_LIST) {
    req.body_case = PCACHEPB__REQUEST__BODY_LIST;
    req.list = &l;
  } else {
    req.body_case = PCACHEPB__REQUEST__BODY_STATS;
    req.stats = &s;
  }
  if ((r = wire_try_call(fd, &req, &rep)) < 0)
    return fail("transport", r);
  if (rep.resp->status)
    fail("request", rep.resp->status);
  wire_reply_free(&rep);
  count(op);
}

static void *run(void *arg) {
  client *c = arg;
  int fd = test_open(&env, "load", WIRE_TIMEOUT_MS);
  if (fd < 0) {
    fail("connect", fd);
    return NULL;
  }
  while (atomic_load(&phase) < 2) {
    int dice = rand_r(&c->seed) % 100;
    if (c->n_live < 4 || dice < 15)
      do_put(fd, c);
    else if (dice < 65)
      do_get(fd, c);
    else if (dice < 75)
      simple(fd, OP_PREFETCH);
    else if (dice < 82)
      simple(fd, OP_LIST);
    else if (dice < 90)
      do_purge(fd, c);
    else
      simple(fd, OP_STATS);
  }
  close(fd);
  return NULL;
}

int main(void) {
  /* One process stands for CLIENTS clients: its own bound as high. */
  const char *args[] = {"--max-connections",
                        "128",
                        "--max-connections-per-process",
                        "128",
                        "--log-level",
                        "info",
                        NULL};
  long seconds = rel_env_long("PCACHE_REL_LOAD_SECONDS", 5);
  static client clients[CLIENTS];
  pthread_t th[CLIENTS];
  long rss0, rss1, rss_peak = 0, anon0, anon1;
  uint64_t total = 0, t0;
  int fd;

  test_env_init(&env, "rel-load");
  wire_guard(&env);
  test_daemon_start(&env, args);
  wire_devkey(5, &key);
  for (int i = 0; i < CLIENTS; i++) {
    clients[i].id = i;
    clients[i].seed = (unsigned)(i * 7919 + 1);
    clients[i].next_salt = 1;
    ASSERT_EQ(pthread_create(&th[i], NULL, run, &clients[i]), 0);
  }
  /* Warm-up: every client has its working set and the allocator its arenas. */
  sleep(1);
  rss0 = rel_rss_kb(env.daemon_pid);
  anon0 = rel_anon_kb(env.daemon_pid);
  atomic_store(&phase, 1);
  t0 = rel_now_ms();
  for (long s = 0; s < seconds; s++) {
    long rss;
    sleep(1);
    rss = rel_rss_kb(env.daemon_pid);
    if (rss > rss_peak)
      rss_peak = rss;
  }
  atomic_store(&phase, 2);
  t0 = rel_now_ms() - t0;
  for (int i = 0; i < CLIENTS; i++)
    pthread_join(th[i], NULL);
  rss1 = rel_rss_kb(env.daemon_pid);
  anon1 = rel_anon_kb(env.daemon_pid);

  fd = wire_open(&env, "check");
  ASSERT_EQ(rel_verify(fd), 0);
  close(fd);
  for (int i = 0; i < 6; i++)
    total += atomic_load(&ops[i]);
  printf("load: %d clients, %llu ms, %llu requests (%llu/s): get %llu prefetch %llu put %llu "
         "list %llu purge %llu stats %llu; errors %llu; RSS %ld -> %ld KiB (peak %ld), "
         "anonymous %ld -> %ld KiB\n",
         CLIENTS, (unsigned long long)t0, (unsigned long long)total,
         (unsigned long long)(total * 1000 / (t0 ? t0 : 1)),
         (unsigned long long)atomic_load(&ops[OP_GET]),
         (unsigned long long)atomic_load(&ops[OP_PREFETCH]),
         (unsigned long long)atomic_load(&ops[OP_PUT]),
         (unsigned long long)atomic_load(&ops[OP_LIST]),
         (unsigned long long)atomic_load(&ops[OP_PURGE]),
         (unsigned long long)atomic_load(&ops[OP_STATS]), (unsigned long long)atomic_load(&errors),
         rss0, rss1, rss_peak, anon0, anon1);
  rel_figure("load_clients", "%d", CLIENTS);
  rel_figure("load_seconds", "%llu", (unsigned long long)(t0 / 1000));
  rel_figure("load_requests", "%llu", (unsigned long long)total);
  rel_figure("load_requests_per_s", "%llu", (unsigned long long)(total * 1000 / (t0 ? t0 : 1)));
  rel_figure("load_errors", "%llu", (unsigned long long)atomic_load(&errors));
  rel_figure("load_rss_kb_start", "%ld", rss0);
  rel_figure("load_rss_kb_end", "%ld", rss1);
  rel_figure("load_rss_kb_peak", "%ld", rss_peak);
  rel_figure("load_anon_kb_start", "%ld", anon0);
  rel_figure("load_anon_kb_end", "%ld", anon1);
  ASSERT_EQ(atomic_load(&errors), 0);
  ASSERT_GT(total, 0);
  /* Flat: the store is mmapped (its pages count in RSS as it grows), so
   * allow the data written plus a little; a leak per request would be far
   * more over this many requests. */
  if (!REL_SANITIZED) {
    ASSERT_LT(rss1, rss0 + 64 * 1024);
    /* The heap alone: flat within 8 MiB (allocator slack, touch batches). */
    ASSERT_LT(anon1, anon0 + 8 * 1024);
  }
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
