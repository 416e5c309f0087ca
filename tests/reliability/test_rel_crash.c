/* Crash consistency: pcached is killed with SIGKILL at a random moment
 * while 8 clients Put as fast as it commits. After each restart the store
 * opens (never moved aside), Verify finds nothing wrong, and every Put that
 * was acknowledged is there, byte for byte. PCACHE_REL_KILLS sets the
 * number of kills (5 here, 50 in scripts/reliability.sh --long). */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rel_util.h"
#include "test.h"

#define CLIENTS 8
#define MAX_ACKED 200000

static test_env env;
static pcache__devkey key;
static atomic_int stop;

/* Every acknowledged Put: its state hash and blob (size, pattern salt). */
typedef struct acked {
  pcache__hash hash;
  uint64_t salt;
  uint32_t size;
} acked;
static acked *acks;
static atomic_size_t n_acks;
static atomic_uint_fast64_t salt_next = 1;
static atomic_uint_fast64_t puts_sent;

static size_t blob_size_for(uint64_t salt) { return 64 + (salt * 2654435761u) % 8000; }

static void *client(void *arg) {
  int fd = test_open(&env, "crash", WIRE_TIMEOUT_MS);
  (void)arg;
  while (fd >= 0 && !atomic_load(&stop)) {
    /* 1 to 4 items per Put: group commits mix requests of all sizes. */
    wire_item items[4];
    uint64_t first = atomic_fetch_add(&salt_next, 4);
    size_t n = 1 + first / 4 % 4;
    int r;
    for (size_t i = 0; i < n; i++)
      rel_item_make(&items[i], &key, first + i, blob_size_for(first + i));
    atomic_fetch_add(&puts_sent, 1);
    r = rel_put(fd, &key, items, n);
    if (r >= 0) {
      /* Acknowledged: every item of it must survive any crash from now. */
      ASSERT_EQ(r, (int)n);
      for (size_t i = 0; i < n; i++) {
        size_t at = atomic_fetch_add(&n_acks, 1);
        ASSERT_LT(at, MAX_ACKED);
        acks[at] = (acked){items[i].hash, first + i, (uint32_t)blob_size_for(first + i)};
      }
    }
    for (size_t i = 0; i < n; i++)
      wire_item_free(&items[i]);
    if (r < 0)
      break; /* the daemon is gone */
  }
  if (fd >= 0)
    close(fd);
  return NULL;
}

/* Every acknowledged entry is present with its exact bytes. */
static void check_all(int fd) {
  size_t n = atomic_load(&n_acks);
  pcache__hash *hashes = malloc((n + 1) * sizeof *hashes);
  for (size_t i = 0; i < n; i++)
    hashes[i] = acks[i].hash;
  /* A reply stops at the client's budget (GetReply.more): the next Get
   * starts after the last hash it answered. */
  for (size_t at = 0, m; at < n; at += m) {
    wire_reply rep;
    m = n - at < 1024 ? n - at : 1024;
    wire_get(fd, &key, hashes + at, m, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    if (rep.resp->get->n_missing)
      TEST_FAIL_("%zu of %zu acknowledged entries missing after a crash",
                 rep.resp->get->n_missing, m);
    ASSERT_EQ(rep.resp->get->more, rep.resp->get->n_blobs < m);
    ASSERT_GE(rep.resp->get->n_blobs, 1);
    m = rep.resp->get->n_blobs;
    for (size_t i = 0; i < m; i++) {
      const acked *a = &acks[at + i];
      size_t size;
      const uint8_t *b = wire_blob_data(&rep, rep.resp->get->blobs[i], &size);
      uint8_t *want = wire_blob(&key, a->size, (uint8_t)a->salt);
      ASSERT_MEMEQ(rep.resp->get->blobs[i]->state_hash.data, a->hash.bytes, 16);
      ASSERT_EQ(size, a->size);
      ASSERT_MEMEQ(b, want, size);
      free(want);
    }
    wire_reply_free(&rep);
  }
  free(hashes);
}

int main(void) {
  long kills = rel_env_long("PCACHE_REL_KILLS", 5);
  unsigned seed = (unsigned)rel_env_long("PCACHE_REL_SEED", (long)getpid());
  uint64_t t_start = rel_now_ms();

  test_env_init(&env, "rel-crash");
  wire_guard(&env);
  wire_devkey(4, &key);
  acks = calloc(MAX_ACKED, sizeof *acks);
  srand(seed);
  printf("seed %u, %ld kills\n", seed, kills);

  for (long k = 0; k < kills; k++) {
    pthread_t th[CLIENTS];
    int fd;
    test_daemon_start(&env, NULL);
    atomic_store(&stop, 0);
    for (int i = 0; i < CLIENTS; i++)
      ASSERT_EQ(pthread_create(&th[i], NULL, client, NULL), 0);
    usleep((useconds_t)(20000 + rand() % 400000));
    test_daemon_stop(&env, SIGKILL);
    atomic_store(&stop, 1);
    for (int i = 0; i < CLIENTS; i++)
      pthread_join(th[i], NULL);

    /* Restart: the store opens as it was, verifies, and holds every ack. */
    test_daemon_start(&env, NULL);
    ASSERT_EQ(test_count_aside(&env), 0);
    fd = wire_open(&env, "check");
    ASSERT_EQ(rel_verify(fd), 0);
    check_all(fd);
    close(fd);
    test_daemon_stop(&env, SIGTERM);
    printf("kill %ld: %zu acknowledged Puts so far, all present\n", k + 1,
           atomic_load(&n_acks));
  }
  rel_figure("crash_kills", "%ld", kills);
  rel_figure("crash_acked_items", "%zu", atomic_load(&n_acks));
  rel_figure("crash_put_requests", "%llu", (unsigned long long)atomic_load(&puts_sent));
  rel_figure("crash_lost", "0");
  rel_figure("crash_seconds", "%llu", (unsigned long long)((rel_now_ms() - t_start) / 1000));
  free(acks);
  test_env_cleanup(&env);
  return 0;
}
