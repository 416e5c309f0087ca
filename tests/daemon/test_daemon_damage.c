/* Issue 12 §2: LMDB has no page checksums, so a damaged store used to
 * fault or abort pcached at every start (a truncated data.mdb: SIGBUS; a
 * zeroed page: an assertion on the first List; a flipped bit in an
 * overflow page header: an abort in the frees of purge, repair and
 * eviction). Each is made here on the real daemon's store, which must be
 * moved aside with one log line while the daemon comes up and serves. The
 * same overflow damage made while the daemon runs is reported by Verify,
 * and purge fails cleanly instead of aborting. */
#include <dirent.h>
#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

#define N_ITEMS 24
#define PAGE 4096

static test_env env;
static pcache__devkey key;

static void data_path(char *out, size_t size) { snprintf(out, size, "%s/data.mdb", env.data_dir); }

/* The daemon's log so far, NUL-terminated (free it). */
static char *read_log(void) {
  static const size_t cap = 1 << 20;
  char *buf = calloc(1, cap);
  int fd = open(env.log_path, O_RDONLY);
  ssize_t n;
  ASSERT_TRUE(buf != NULL);
  ASSERT_GE(fd, 0);
  n = read(fd, buf, cap - 1);
  ASSERT_GE(n, 0);
  close(fd);
  return buf;
}

/* Entries whose blobs need overflow pages (over half a page each). */
static void put_items(void) {
  wire_item items[N_ITEMS];
  wire_reply rep;
  int fd = wire_open(&env, "damage");
  for (int i = 0; i < N_ITEMS; i++)
    wire_item_make(&items[i], &key, 700 + (uint64_t)i, 6000 + 100 * (size_t)i);
  wire_put(fd, &key, items, N_ITEMS, &rep);
  ASSERT_EQ(rep.resp->put->stored, N_ITEMS);
  wire_reply_free(&rep);
  close(fd);
  for (int i = 0; i < N_ITEMS; i++)
    wire_item_free(&items[i]);
}

static void send_simple(int fd, Pcachepb__Request__BodyCase body, wire_reply *rep);

/* Entries stored, purged and stored again: a store with free pages, as
 * any store that has evicted is. LMDB's free of an overflow page whose
 * header says "dirty" reaches its failing assertion only then. */
static void put_purge_put(void) {
  wire_reply rep;
  int fd;
  put_items();
  fd = wire_open(&env, "damage");
  send_simple(fd, PCACHEPB__REQUEST__BODY_PURGE, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
  close(fd);
  put_items();
}

static void populate(void) {
  test_daemon_start(&env, NULL);
  put_purge_put();
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
}

static void send_simple(int fd, Pcachepb__Request__BodyCase body, wire_reply *rep) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  Pcachepb__Verify verify = PCACHEPB__VERIFY__INIT;
  Pcachepb__Purge purge = PCACHEPB__PURGE__INIT;
  req.body_case = body;
  list.entries = 1;
  verify.repair = 1;
  purge.selector_case = PCACHEPB__PURGE__SELECTOR_ALL;
  purge.all = 1;
  /* The bodies share a union: set only the one sent. */
  if (body == PCACHEPB__REQUEST__BODY_LIST)
    req.list = &list;
  else if (body == PCACHEPB__REQUEST__BODY_VERIFY)
    req.verify = &verify;
  else
    req.purge = &purge;
  wire_call(fd, &req, rep);
}

/* Starts the daemon on the damaged store: it must come up (the harness
 * fails if it dies first), have moved the store aside, and serve. */
static void expect_moved_aside(int corrupt_before, const char *log_words) {
  wire_reply rep;
  int fd;
  char *log;
  test_daemon_start(&env, NULL);
  ASSERT_EQ(test_count_aside(&env), corrupt_before + 1);
  log = read_log();
  ASSERT_TRUE(strstr(log, "moved it to") != NULL);
  if (!strstr(log, log_words)) {
    test_dump_daemon_log(&env);
    TEST_FAIL_("the log does not say '%s'", log_words);
  }
  free(log);
  fd = wire_open(&env, "damage");
  send_simple(fd, PCACHEPB__REQUEST__BODY_LIST, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->entries, 0);
  wire_reply_free(&rep);
  close(fd);
  put_items();
  fd = wire_open(&env, "damage");
  send_simple(fd, PCACHEPB__REQUEST__BODY_PURGE, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->purge->entries, N_ITEMS);
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  ASSERT_EQ(truncate(env.log_path, 0), 0);
}

/* The root page of a named database, from its record in the main
 * database (MDB_db: md_root is the u64 at byte 40). */
static uint64_t db_root(const char *name) {
  MDB_env *menv;
  MDB_txn *txn;
  MDB_dbi main_dbi;
  MDB_val k = {strlen(name), (void *)name}, v;
  uint64_t root;
  ASSERT_EQ(mdb_env_create(&menv), 0);
  ASSERT_EQ(mdb_env_open(menv, env.data_dir, MDB_RDONLY, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(menv, NULL, MDB_RDONLY, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, NULL, 0, &main_dbi), 0);
  ASSERT_EQ(mdb_get(txn, main_dbi, &k, &v), 0);
  ASSERT_GE(v.mv_size, 48);
  memcpy(&root, (const uint8_t *)v.mv_data + 40, 8);
  mdb_txn_abort(txn);
  mdb_env_close(menv);
  return root;
}

/* A live overflow page: one holding a blob now (the file also holds
 * freed ones, whose damage is harmless). An overflow value starts right
 * after its page's 16-byte header, which names the page. */
static uint64_t live_overflow_page(void) {
  MDB_env *menv;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  MDB_val k, v;
  uint64_t pg = 0;
  ASSERT_EQ(mdb_env_create(&menv), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(menv, 16), 0);
  ASSERT_EQ(mdb_env_open(menv, env.data_dir, MDB_RDONLY, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(menv, NULL, MDB_RDONLY, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, "blobs", 0, &dbi), 0);
  ASSERT_EQ(mdb_cursor_open(txn, dbi, &cur), 0);
  for (int rc = mdb_cursor_get(cur, &k, &v, MDB_FIRST); rc == 0 && !pg;
       rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT))
    if ((uintptr_t)v.mv_data % PAGE == 16)
      memcpy(&pg, (const uint8_t *)v.mv_data - 16, 8);
  mdb_cursor_close(cur);
  mdb_txn_abort(txn);
  mdb_env_close(menv);
  ASSERT_TRUE(pg != 0);
  return pg;
}

/* Flips one bit of the first overflow page's header (byte, bit). */
static void flip_overflow_header(unsigned byte, unsigned bit) {
  char path[400];
  uint8_t b;
  int fd;
  uint64_t pg;
  data_path(path, sizeof path);
  pg = live_overflow_page();
  fd = open(path, O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pread(fd, &b, 1, (off_t)(pg * PAGE + byte)), 1);
  b ^= (uint8_t)(1u << bit);
  ASSERT_EQ(pwrite(fd, &b, 1, (off_t)(pg * PAGE + byte)), 1);
  close(fd);
}

static void zero_page(uint64_t pg) {
  char path[400];
  static const uint8_t zeros[PAGE];
  int fd;
  data_path(path, sizeof path);
  fd = open(path, O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(pwrite(fd, zeros, PAGE, (off_t)(pg * PAGE)), PAGE);
  close(fd);
}

static int corrupt; /* stores moved aside so far */

static void case_truncated(void) {
  char path[400];
  struct stat st;
  populate();
  data_path(path, sizeof path);
  ASSERT_EQ(stat(path, &st), 0);
  ASSERT_EQ(truncate(path, st.st_size / 2 / PAGE * PAGE), 0);
  expect_moved_aside(corrupt++, "ends at byte");
}

/* One zeroed page: the root of the entries database, which List reads. */
static void case_zeroed_entries(void) {
  populate();
  zero_page(db_root("entries"));
  expect_moved_aside(corrupt++, "entries");
}

static void case_zeroed_blobs(void) {
  populate();
  zero_page(db_root("blobs"));
  expect_moved_aside(corrupt++, "blobs");
}

/* One flipped bit in a live overflow page's header: in the flags (P_DIRTY,
 * which sends LMDB's free down its dirty-page path), the page count, the
 * page number. */
static void case_overflow_flags(void) {
  populate();
  flip_overflow_header(10, 4);
  expect_moved_aside(corrupt++, "overflow page");
}

static void case_overflow_count(void) {
  populate();
  flip_overflow_header(12, 3);
  expect_moved_aside(corrupt++, "overflow page");
}

static void case_overflow_pgno(void) {
  populate();
  flip_overflow_header(0, 7);
  expect_moved_aside(corrupt++, "overflow page");
}

/* The same damage while the daemon runs: Verify reports it (no state
 * hash, PCACHE_ESTORE) and repairs nothing; purge, which aborted the
 * daemon in mdb_ovpage_free, fails cleanly; the daemon keeps answering;
 * the next start moves the store aside. */
static void case_live_overflow(void) {
  wire_reply rep;
  int fd;
  test_daemon_start(&env, NULL);
  put_purge_put();
  flip_overflow_header(10, 4);
  fd = wire_open(&env, "damage");
  send_simple(fd, PCACHEPB__REQUEST__BODY_VERIFY, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->verify->n_problems, 1);
  ASSERT_ERR(rep.resp->verify->problems[0]->status, PCACHE_ESTORE);
  ASSERT_EQ(rep.resp->verify->problems[0]->state_hash.len, 0);
  ASSERT_TRUE(strstr(rep.resp->verify->problems[0]->message, "overflow page") != NULL);
  ASSERT_EQ(rep.resp->verify->removed, 0);
  wire_reply_free(&rep);
  send_simple(fd, PCACHEPB__REQUEST__BODY_PURGE, &rep);
  ASSERT_ERR(rep.resp->status, PCACHE_ESTORE);
  wire_reply_free(&rep);
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->entries, N_ITEMS);
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  expect_moved_aside(corrupt++, "overflow page");
}

/* data.mdb truncated under the serving daemon: the next read of a page
 * past the end is SIGBUS. The daemon dies of it at a known point, saying
 * so, and the next start moves the store aside instead of faulting again. */
static void case_live_truncated(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  wire_reply rep;
  char path[400], *log;
  int fd, status;
  test_daemon_start(&env, NULL);
  put_purge_put();
  data_path(path, sizeof path);
  ASSERT_EQ(truncate(path, 2 * PAGE), 0); /* the meta pages only */
  fd = wire_open(&env, "damage");
  list.entries = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_LIST;
  req.list = &list;
  ASSERT_EQ(wire_send(fd, &req), 0);
  ASSERT_TRUE(wire_recv(fd, &rep) < 0);
  close(fd);
  ASSERT_EQ(waitpid(env.daemon_pid, &status, 0), env.daemon_pid);
  env.daemon_pid = 0;
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(WTERMSIG(status), SIGBUS);
  log = read_log();
  ASSERT_TRUE(strstr(log, "store: SIGBUS") != NULL);
  free(log);
  ASSERT_EQ(truncate(env.log_path, 0), 0);
  expect_moved_aside(corrupt++, "ends at byte");
}

static const struct {
  const char *name;
  void (*run)(void);
} cases[] = {
    {"truncated", case_truncated},         {"zeroed-entries", case_zeroed_entries},
    {"zeroed-blobs", case_zeroed_blobs},   {"overflow-flags", case_overflow_flags},
    {"overflow-count", case_overflow_count}, {"overflow-pgno", case_overflow_pgno},
    {"live-overflow", case_live_overflow},   {"live-truncated", case_live_truncated},
};

/* With an argument, runs only the case of that name. */
int main(int argc, char **argv) {
  test_env_init(&env, "damage");
  wire_guard(&env);
  wire_devkey(12, &key);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    if (argc < 2 || strcmp(argv[1], cases[i].name) == 0)
      cases[i].run();
  test_env_cleanup(&env);
  return 0;
}
