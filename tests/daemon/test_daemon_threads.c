/* Several I/O threads (--threads 4): 16 concurrent clients mixing Puts and
 * Gets are all answered correctly, each on its own connection; then
 * SIGTERM while Puts are in flight exits 0 and every acknowledged Put is
 * in the store after a restart. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

enum { CLIENTS = 16, SEEDS = 8, ROUNDS = 25, MAX_ACKED = 100000 };

static test_env env;
static pcache__devkey key;
static wire_item seeds[SEEDS];
static pthread_barrier_t barrier;

/* Checks that rep holds exactly the blobs of items (any order). */
static void check_blobs(const wire_reply *rep, wire_item *const *items, size_t n) {
  ASSERT_EQ(rep->resp->status, 0);
  ASSERT_EQ(rep->resp->get->n_missing, 0);
  ASSERT_EQ(rep->resp->get->n_blobs, n);
  for (size_t i = 0; i < n; i++) {
    const Pcachepb__Blob *b = rep->resp->get->blobs[i];
    const wire_item *want = NULL;
    const uint8_t *data;
    size_t size;
    for (size_t j = 0; j < n; j++)
      if (b->state_hash.len == PCACHE_HASH_SIZE &&
          memcmp(b->state_hash.data, items[j]->hash.bytes, PCACHE_HASH_SIZE) == 0)
        want = items[j];
    ASSERT_TRUE(want != NULL);
    data = wire_blob_data(rep, b, &size);
    ASSERT_EQ(size, want->item.blob.len);
    ASSERT_TRUE(memcmp(data, want->item.blob.data, size) == 0);
  }
}

static void *mixed_client(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  int fd = wire_open(&env, "threads");
  pthread_barrier_wait(&barrier);
  for (unsigned i = 0; i < ROUNDS; i++) {
    wire_item it;
    wire_item *want[2];
    pcache__hash hashes[2];
    wire_reply rep;
    /* Sizes on both sides of the bulk threshold. */
    wire_item_make(&it, &key, 1000 + t * 1000 + i, i % 5 == 0 ? 40000 : 300);
    wire_put(fd, &key, &it, 1, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->put->stored, 1);
    wire_reply_free(&rep);
    want[0] = &it;
    want[1] = &seeds[(t + i) % SEEDS];
    hashes[0] = want[0]->hash;
    hashes[1] = want[1]->hash;
    wire_get(fd, &key, hashes, 2, &rep);
    check_blobs(&rep, want, 2);
    wire_reply_free(&rep);
    wire_item_free(&it);
  }
  close(fd);
  return NULL;
}

/* Phase 2: Puts until the daemon goes away; records the acknowledged. */
typedef struct putter {
  unsigned t;
  pcache__hash *acked;
  size_t n_acked;
} putter;

static void *put_until_gone(void *arg) {
  putter *p = arg;
  int fd = wire_open(&env, "threads");
  pthread_barrier_wait(&barrier);
  for (unsigned i = 0; p->n_acked < MAX_ACKED / CLIENTS; i++) {
    wire_put_msg m;
    wire_item it;
    wire_reply rep;
    int r;
    wire_item_make(&it, &key, 500000 + p->t * 10000 + i, 200);
    wire_put_msg_init(&m, &key, "test device", &it, 1);
    r = wire_try_call(fd, &m.req, &rep);
    wire_put_msg_free(&m);
    if (r < 0) {
      wire_item_free(&it);
      break; /* the daemon stopped: what was acknowledged must be there */
    }
    /* A reply is either the ack of a commit or a refusal; nothing else. */
    if (rep.resp->status == 0 && rep.resp->put && rep.resp->put->stored == 1)
      p->acked[p->n_acked++] = it.hash;
    else
      ASSERT_TRUE(rep.resp->status != 0);
    wire_reply_free(&rep);
    wire_item_free(&it);
  }
  close(fd);
  return NULL;
}

int main(void) {
  static const char *const args[] = {"--threads", "4", "--max-connections", "64", NULL};
  pthread_t th[CLIENTS];
  putter putters[CLIENTS];
  wire_item *seed_ptrs[SEEDS];
  struct timespec pause = {0, 150 * 1000 * 1000};
  wire_reply rep;
  size_t total = 0;
  int fd, status;

  test_env_init(&env, "threads");
  wire_guard(&env);
  wire_devkey(7, &key);
  test_daemon_start(&env, args);

  /* --- 16 clients on 4 threads, Puts and Gets interleaved. */
  fd = wire_open(&env, "threads");
  for (unsigned i = 0; i < SEEDS; i++) {
    wire_item_make(&seeds[i], &key, 1 + i, 2000);
    seed_ptrs[i] = &seeds[i];
  }
  wire_put(fd, &key, seeds, SEEDS, &rep);
  ASSERT_EQ(rep.resp->put->stored, SEEDS);
  wire_reply_free(&rep);
  ASSERT_EQ(pthread_barrier_init(&barrier, NULL, CLIENTS), 0);
  for (uintptr_t t = 0; t < CLIENTS; t++)
    ASSERT_EQ(pthread_create(&th[t], NULL, mixed_client, (void *)t), 0);
  for (int t = 0; t < CLIENTS; t++)
    pthread_join(th[t], NULL);
  pthread_barrier_destroy(&barrier);
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->puts, SEEDS + CLIENTS * ROUNDS);
  ASSERT_EQ(rep.resp->stats->entries, SEEDS + CLIENTS * ROUNDS);
  ASSERT_EQ(rep.resp->stats->hits, 2 * CLIENTS * ROUNDS);
  ASSERT_EQ(rep.resp->stats->misses, 0);
  wire_reply_free(&rep);
  {
    pcache__hash hashes[SEEDS];
    for (unsigned i = 0; i < SEEDS; i++)
      hashes[i] = seeds[i].hash;
    wire_get(fd, &key, hashes, SEEDS, &rep);
    check_blobs(&rep, seed_ptrs, SEEDS);
    wire_reply_free(&rep);
  }
  close(fd);

  /* --- SIGTERM with Puts in flight on every thread. */
  ASSERT_EQ(pthread_barrier_init(&barrier, NULL, CLIENTS + 1), 0);
  for (unsigned t = 0; t < CLIENTS; t++) {
    putters[t].t = t;
    putters[t].n_acked = 0;
    putters[t].acked = calloc(MAX_ACKED / CLIENTS, sizeof *putters[t].acked);
    ASSERT_EQ(pthread_create(&th[t], NULL, put_until_gone, &putters[t]), 0);
  }
  pthread_barrier_wait(&barrier);
  nanosleep(&pause, NULL);
  status = test_daemon_stop(&env, SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  for (int t = 0; t < CLIENTS; t++)
    pthread_join(th[t], NULL);
  pthread_barrier_destroy(&barrier);

  test_daemon_start(&env, args);
  fd = wire_open(&env, "threads");
  for (unsigned t = 0; t < CLIENTS; t++) {
    total += putters[t].n_acked;
    for (size_t off = 0; off < putters[t].n_acked; off += 1000) {
      size_t n = putters[t].n_acked - off < 1000 ? putters[t].n_acked - off : 1000;
      wire_get(fd, &key, putters[t].acked + off, n, &rep);
      ASSERT_EQ(rep.resp->status, 0);
      ASSERT_EQ(rep.resp->get->n_missing, 0);
      ASSERT_EQ(rep.resp->get->n_blobs, n);
      wire_reply_free(&rep);
    }
    free(putters[t].acked);
  }
  fprintf(stderr, "SIGTERM under load: %zu acknowledged Puts, all durable\n", total);
  ASSERT_TRUE(total > 0);
  close(fd);

  status = test_daemon_stop(&env, SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  for (unsigned i = 0; i < SEEDS; i++)
    wire_item_free(&seeds[i]);
  test_env_cleanup(&env);
  return 0;
}
