/* Disk full, a full LMDB map, and a tiny --max-size. The data directory of
 * the first part is a 600 KiB tmpfs (mounted in a private mount namespace:
 * needs root or user namespaces, else the test is skipped with 77): once
 * data.mdb cannot grow, Puts are still acknowledged (the least recently
 * used are evicted), the log and `pcachectl status` say the disk is full
 * and name commands that work, `pcachectl purge --app` and `--all` work
 * on the full disk, and a restart with a smaller --max-size evicts down
 * to it before serving; the store verifies throughout.
 * The second part forces a 1 MiB map (--map-size) so commits hit
 * MDB_MAP_FULL: the writer evicts and retries, every Put is acknowledged.
 * The third caps the store at 128 KiB: eviction keeps it under. After each
 * part pcached is killed and restarted: the store opens as it was. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
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

/* Runs pcachectl (PCACHE_SOCKET is the test's); its stdout in out.
 * Returns its exit status. */
static int ctl(char *out, size_t size, const char *args) {
  char cmd[600];
  FILE *p;
  size_t n;
  snprintf(cmd, sizeof cmd, "%s %s 2>&1", PCACHECTL_PATH, args);
  p = popen(cmd, "r");
  ASSERT_TRUE(p != NULL);
  n = fread(out, 1, size - 1, p);
  out[n] = '\0';
  printf("$ pcachectl %s\n%s", args, out);
  return WEXITSTATUS(pclose(p));
}

/* Puts 64 KiB items until the writer says the disk is full, and three
 * more (it evicts to make room, so they are still acknowledged); returns
 * how many went in before it was full. last: the newest. */
static int fill(int fd, uint64_t salt, wire_item *last) {
  int n = 0, full = -1;
  for (; n < 40 && (full < 0 || n < full + 3); n++) {
    wire_reply rep;
    if (n)
      wire_item_free(last);
    ASSERT_EQ(put1(fd, salt + (uint64_t)n, 64 << 10, last), 0);
    wire_stats(fd, &rep);
    if (full < 0 && strcmp(rep.resp->stats->full, "disk") == 0)
      full = n + 1;
    wire_reply_free(&rep);
  }
  ASSERT_EQ(present(fd, last), 1);
  return full < 0 ? n : full;
}

static void part_disk_full(void) {
  const char *args[] = {"--max-size", "64M", "--map-size", "16M", "--max-blob", "256K", NULL};
  const char *small[] = {"--max-size", "128K", "--map-size", "16M", "--max-blob", "256K", NULL};
  wire_item last, it;
  char out[8192];
  int fd, n;
  uint64_t entries, bytes;
  Pcachepb__StatsReply st;
  wire_reply rep;

  test_env_init(&env, "rel-diskfull");
  wire_guard(&env);
  mkdir(env.data_dir, 0700);
  /* The repro: a 600 KiB file system under the store. */
  if (mount("pcache-test", env.data_dir, "tmpfs", 0, "size=600k,mode=0700") < 0) {
    fprintf(stderr, "SKIP: cannot mount a tmpfs: %s\n", strerror(errno));
    test_env_cleanup(&env);
    exit(77);
  }
  test_daemon_start(&env, args);
  fd = wire_open(&env, "diskfull");
  /* 64 KiB Puts until data.mdb cannot grow: the writer evicts the least
   * recently used and every Put is still acknowledged. */
  n = fill(fd, 1, &last);
  printf("disk full after %d Puts of 64 KiB\n", n);
  rel_figure("diskfull_puts_until_full", "%d", n);
  ASSERT_LT(n, 40);
  wire_item_free(&last);
  /* The log says so once, naming commands that work in this state. */
  ASSERT_TRUE(log_contains("the file system holding the store is full"));
  ASSERT_TRUE(log_contains("pcachectl purge --all"));
  /* status says it plainly, with the fix, in text and JSON. */
  ASSERT_EQ(ctl(out, sizeof out, "status"), 0);
  ASSERT_TRUE(strstr(out, "FULL:        the disk holding the store is full"));
  ASSERT_TRUE(strstr(out, "pcachectl purge --all"));
  ASSERT_EQ(ctl(out, sizeof out, "--json status"), 0);
  ASSERT_TRUE(strstr(out, "\"full\": \"disk\""));
  ASSERT_EQ(rel_verify(fd), 0);
  restart_check(&fd);

  /* The advised commands work on the full disk: purge --app, then
   * purge --all (each in slices small enough to commit). */
  ASSERT_EQ(put1(fd, 200, 64 << 10, &it), 0); /* fills it again after the restart */
  wire_item_free(&it);
  rel_stats(fd, &entries, NULL, NULL, NULL);
  ASSERT_GT(entries, 0);
  ASSERT_EQ(ctl(out, sizeof out, "purge --app diskfull"), 0);
  ASSERT_TRUE(strstr(out, "purged "));
  rel_stats(fd, &entries, NULL, NULL, NULL);
  ASSERT_EQ(entries, 0);
  n = fill(fd, 300, &last);
  wire_item_free(&last);
  rel_stats(fd, &entries, NULL, NULL, NULL);
  ASSERT_GT(entries, 3);
  ASSERT_EQ(ctl(out, sizeof out, "purge --all"), 0);
  rel_stats(fd, &entries, NULL, NULL, NULL);
  ASSERT_EQ(entries, 0);
  /* Room again: status no longer says full, and Puts fit without
   * evicting anything. */
  wire_stats(fd, &rep);
  ASSERT_EQ(strcmp(rep.resp->stats->full, ""), 0);
  wire_reply_free(&rep);
  for (int i = 0; i < 3; i++) {
    ASSERT_EQ(put1(fd, 400 + (uint64_t)i, 64 << 10, &it), 0);
    wire_item_free(&it);
  }
  rel_stats(fd, &entries, NULL, NULL, NULL);
  ASSERT_EQ(entries, 3);
  ASSERT_EQ(rel_verify(fd), 0);

  /* Full again, then a restart with a smaller --max-size: the store is
   * evicted down to it before serving. */
  n = fill(fd, 500, &last);
  wire_item_free(&last);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
  test_daemon_start(&env, small);
  fd = wire_open(&env, "diskfull");
  wire_stats(fd, &rep);
  st = *rep.resp->stats;
  bytes = st.bytes_used + st.snapshot_bytes;
  wire_reply_free(&rep);
  printf("restarted with --max-size 128K: %llu bytes kept\n", (unsigned long long)bytes);
  ASSERT_LE(bytes, 128u << 10);
  ASSERT_TRUE(log_contains("over --max-size"));
  ASSERT_EQ(put1(fd, 600, 64 << 10, &it), 0);
  ASSERT_EQ(present(fd, &it), 1);
  wire_item_free(&it);
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

/* A private mount namespace, so the tmpfs is seen by this test and the
 * pcached it starts, and goes away with them: as root, a mount namespace;
 * else, where the kernel allows it, a user namespace with one as well
 * (what `unshare -rm` does), in which this uid is root. */
static int private_mounts(void) {
  uid_t uid = getuid();
  gid_t gid = getgid();
  char map[64];
  if (unshare(CLONE_NEWNS) < 0) {
    int fdm;
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
      return -1;
    if ((fdm = open("/proc/self/setgroups", O_WRONLY)) >= 0) {
      if (write(fdm, "deny", 4) < 0)
        return -1;
      close(fdm);
    }
    snprintf(map, sizeof map, "0 %u 1", (unsigned)uid);
    if ((fdm = open("/proc/self/uid_map", O_WRONLY)) < 0 || write(fdm, map, strlen(map)) < 0 ||
        close(fdm) < 0)
      return -1;
    snprintf(map, sizeof map, "0 %u 1", (unsigned)gid);
    if ((fdm = open("/proc/self/gid_map", O_WRONLY)) < 0 || write(fdm, map, strlen(map)) < 0 ||
        close(fdm) < 0)
      return -1;
  }
  return mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL);
}

int main(void) {
  wire_devkey(8, &key);
  if (private_mounts() < 0) {
    fprintf(stderr,
            "SKIP: no private mount namespace (%s): needs root, CAP_SYS_ADMIN or "
            "unprivileged user namespaces\n",
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
