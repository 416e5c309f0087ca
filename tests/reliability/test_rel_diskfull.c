/* Disk full, a full LMDB map, and a tiny --max-size. The data directory of
 * the first part is a 2 MiB tmpfs (mounted in a private mount namespace:
 * needs root or user namespaces, else the test is skipped with 77):
 * writes fail with a clear error, nothing crashes, what was acknowledged
 * stays readable, the store verifies, and after a Purge writes work again.
 * The second part forces a 1 MiB map (--map-size) so commits hit
 * MDB_MAP_FULL: the writer evicts and retries, every Put is acknowledged.
 * The third caps the store at 128 KiB: eviction keeps it under. After each
 * part pcached is killed and restarted: the store opens as it was. */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rel_util.h"
#include "test.h"

static test_env env;
static pcache__devkey key;

static int log_contains(const char *what) {
  FILE *f = fopen(env.log_path, "r");
  char line[1024];
  int seen = 0;
  ASSERT_TRUE(f);
  while (fgets(line, sizeof line, f))
    if (strstr(line, what))
      seen = 1;
  fclose(f);
  return seen;
}

/* Puts one item of size bytes; returns its status (0 stored). */
static int put1(int fd, uint64_t salt, size_t size, wire_item *ret_item) {
  wire_reply rep;
  int st;
  wire_item_make(ret_item, &key, salt, size);
  wire_put(fd, &key, ret_item, 1, &rep);
  st = rep.resp->status;
  if (st == 0) {
    ASSERT_EQ(rep.resp->body_case, PCACHEPB__RESPONSE__BODY_PUT);
    st = rep.resp->put->stored == 1 ? 0 : rep.resp->put->results[0]->status;
  }
  if (st)
    fprintf(stderr, "put %llu refused: %s\n", (unsigned long long)salt,
                rep.resp->message ? rep.resp->message : pcache_err_name(st));
  wire_reply_free(&rep);
  return st;
}

static int present(int fd, const wire_item *it) {
  wire_reply rep;
  int n;
  wire_get(fd, &key, &it->hash, 1, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  n = (int)rep.resp->get->n_blobs;
  wire_reply_free(&rep);
  return n;
}

static void restart_check(int *fd) {
  close(*fd);
  test_daemon_stop(&env, SIGKILL);
  test_daemon_start(&env, NULL);
  ASSERT_EQ(test_count_aside(&env), 0);
  *fd = wire_open(&env, "diskfull");
  ASSERT_EQ(rel_verify(*fd), 0);
}

static void part_disk_full(void) {
  const char *args[] = {"--max-size", "64M", "--map-size", "16M", "--max-blob", "256K", NULL};
  wire_item items[100];
  int fd, n = 0, failed = 0, st = 0;
  uint64_t entries;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Purge p = PCACHEPB__PURGE__INIT;
  wire_reply rep;

  test_env_init(&env, "rel-diskfull");
  wire_guard(&env);
  mkdir(env.data_dir, 0700);
  if (mount("pcache-test", env.data_dir, "tmpfs", 0, "size=2m,mode=0700") < 0) {
    fprintf(stderr, "SKIP: cannot mount a tmpfs: %s\n", strerror(errno));
    test_env_cleanup(&env);
    exit(77);
  }
  test_daemon_start(&env, args);
  fd = wire_open(&env, "diskfull");
  while (n < 100) {
    st = put1(fd, (uint64_t)n + 1, 64 << 10, &items[n]);
    if (st) {
      wire_item_free(&items[n]);
      failed = 1;
      break;
    }
    n++;
  }
  printf("disk full: %d Puts of 64 KiB acknowledged, then %d (%s)\n", n, st,
         pcache_err_name(st));
  rel_figure("diskfull_acked_before_full", "%d", n);
  rel_figure("diskfull_error", "%s", pcache_err_name(st));
  ASSERT_TRUE(failed);
  ASSERT_GT(n, 0);
  /* A store error the client can read, not a crash or a hang. */
  ASSERT_TRUE(st == PCACHE_ESTORE || st == PCACHE_EFULL || st == -ENOSPC);
  /* The log says what is wrong, not just LMDB's EIO. */
  ASSERT_TRUE(log_contains("is full"));
  /* Still serving: the acknowledged entries read back, the store verifies. */
  for (int i = 0; i < n; i++)
    ASSERT_EQ(present(fd, &items[i]), 1);
  rel_stats(fd, &entries, NULL, NULL, NULL);
  ASSERT_EQ(entries, (uint64_t)n);
  ASSERT_EQ(rel_verify(fd), 0);
  /* Again after a crash at this moment. */
  restart_check(&fd);
  for (int i = 0; i < n; i++)
    ASSERT_EQ(present(fd, &items[i]), 1);
  /* Room is made by purging; LMDB reuses the freed pages. */
  p.selector_case = PCACHEPB__PURGE__SELECTOR_ALL;
  p.all = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = &p;
  wire_call(fd, &req, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->purge->entries, (uint64_t)n);
  wire_reply_free(&rep);
  for (int i = 0; i < n; i++)
    wire_item_free(&items[i]);
  {
    int ok = 0, tries = 0;
    for (; tries < 20 && ok < 4; tries++) {
      size_t size = tries % 2 ? 64 << 10 : 512;
      if (put1(fd, 1000 + (uint64_t)tries, size, &items[0]) == 0)
        ok++;
      wire_item_free(&items[0]);
    }
    /* LMDB reuses pages a transaction freed only from the second write
     * after it: a small write first, then 64 KiB fit again. */
    ASSERT_EQ(ok, 4);
    ASSERT_EQ(tries, 4);
  }
  ASSERT_EQ(rel_verify(fd), 0);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
  umount2(env.data_dir, MNT_DETACH);
  test_env_cleanup(&env);
}

static void part_map_full(void) {
  const char *args[] = {"--max-size", "64M", "--map-size", "1M", "--max-blob", "256K", NULL};
  wire_item it, last;
  wire_reply rep;
  int fd;
  uint64_t evictions, bytes;

  test_env_init(&env, "rel-mapfull");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "mapfull");
  /* 3 MiB through a 1 MiB map: every Put is still acknowledged. */
  for (int i = 0; i < 96; i++) {
    ASSERT_EQ(put1(fd, 5000 + (uint64_t)i, 32 << 10, &it), 0);
    if (i == 95)
      last = it;
    else
      wire_item_free(&it);
  }
  ASSERT_EQ(present(fd, &last), 1);
  wire_stats(fd, &rep);
  evictions = rep.resp->stats->evictions;
  bytes = rep.resp->stats->bytes_used;
  wire_reply_free(&rep);
  printf("map full: 96 Puts of 32 KiB through a 1 MiB map, all acknowledged; %llu evicted, "
         "%llu bytes kept\n", (unsigned long long)evictions, (unsigned long long)bytes);
  rel_figure("mapfull_evictions", "%llu", (unsigned long long)evictions);
  ASSERT_GT(evictions, 0);
  ASSERT_LT(bytes, 1u << 20);
  ASSERT_EQ(rel_verify(fd), 0);
  restart_check(&fd);
  ASSERT_EQ(present(fd, &last), 1);
  wire_item_free(&last);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
  /* The evict-and-retry path ran (writer.c logs it). */
  ASSERT_TRUE(log_contains("map full"));
  test_env_cleanup(&env);
}

static void part_max_size(void) {
  const char *args[] = {"--max-size", "128K", NULL};
  wire_item it;
  int fd;
  uint64_t bytes, entries;

  test_env_init(&env, "rel-maxsize");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "maxsize");
  for (int i = 0; i < 64; i++) {
    ASSERT_EQ(put1(fd, 9000 + (uint64_t)i, 8 << 10, &it), 0);
    /* The newest is always kept. */
    ASSERT_EQ(present(fd, &it), 1);
    wire_item_free(&it);
    rel_stats(fd, &entries, &bytes, NULL, NULL);
    ASSERT_LE(bytes, 128u << 10);
  }
  ASSERT_LT(entries, 64);
  ASSERT_EQ(rel_verify(fd), 0);
  restart_check(&fd);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
  test_env_cleanup(&env);
}

int main(void) {
  wire_devkey(8, &key);
  /* A private mount namespace: the tmpfs is seen by this test and the
   * pcached it starts, and goes away with them. */
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
    fprintf(stderr, "SKIP: no private mount namespace (%s): needs root or CAP_SYS_ADMIN\n",
            strerror(errno));
    part_map_full();
    part_max_size();
    return 77;
  }
  part_disk_full();
  part_map_full();
  part_max_size();
  return 0;
}
