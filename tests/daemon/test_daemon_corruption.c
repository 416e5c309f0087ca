/* A store that cannot be trusted is never served: a blob corrupted on disk
 * (written here with the LMDB API) is detected, not sent, and dropped; a
 * store of an unknown format version and a garbage data.mdb are moved
 * aside and replaced. */
#include <dirent.h>
#include <fcntl.h>
#include <lmdb.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

static test_env env;

static void with_db(const char *dbname, void (*fn)(MDB_txn *, MDB_dbi, void *), void *ctx) {
  MDB_env *menv;
  MDB_txn *txn;
  MDB_dbi dbi;
  ASSERT_EQ(mdb_env_create(&menv), 0);
  ASSERT_EQ(mdb_env_set_maxdbs(menv, 16), 0);
  ASSERT_EQ(mdb_env_open(menv, env.data_dir, 0, 0600), 0);
  ASSERT_EQ(mdb_txn_begin(menv, NULL, 0, &txn), 0);
  ASSERT_EQ(mdb_dbi_open(txn, dbname, 0, &dbi), 0);
  fn(txn, dbi, ctx);
  ASSERT_EQ(mdb_txn_commit(txn), 0);
  mdb_env_close(menv);
}

static void flip_blob(MDB_txn *txn, MDB_dbi dbi, void *ctx) {
  MDB_val k = {48, ctx}, v, nv;
  uint8_t *copy;
  ASSERT_EQ(mdb_get(txn, dbi, &k, &v), 0);
  copy = malloc(v.mv_size);
  memcpy(copy, v.mv_data, v.mv_size);
  copy[v.mv_size - 1] ^= 0x01; /* the body, not the header */
  nv.mv_size = v.mv_size;
  nv.mv_data = copy;
  ASSERT_EQ(mdb_put(txn, dbi, &k, &nv, 0), 0);
  free(copy);
}

static void set_format(MDB_txn *txn, MDB_dbi dbi, void *ctx) {
  uint8_t fmt[4];
  MDB_val k = {6, "format"}, v = {4, fmt};
  (void)ctx;
  pcache__put_le32(fmt, 99);
  ASSERT_EQ(mdb_put(txn, dbi, &k, &v, 0), 0);
}

static uint64_t entries_now(void) {
  wire_reply rep;
  uint64_t n;
  int fd = wire_open(&env, "corrupt");
  wire_stats(fd, &rep);
  n = rep.resp->stats->entries;
  wire_reply_free(&rep);
  close(fd);
  return n;
}

int main(void) {
  pcache__devkey key;
  wire_item items[2];
  wire_reply rep;
  uint8_t ekey[48];
  int fd;

  test_env_init(&env, "corruption");
  wire_guard(&env);
  wire_devkey(6, &key);
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "corrupt");
  wire_item_make(&items[0], &key, 600, 300);
  wire_item_make(&items[1], &key, 601, 300);
  wire_put(fd, &key, items, 2, &rep);
  ASSERT_EQ(rep.resp->put->stored, 2);
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);

  /* Flip one body byte of each blob. */
  for (int i = 0; i < 2; i++) {
    memcpy(ekey, key.bytes, 32);
    memcpy(ekey + 32, items[i].hash.bytes, 16);
    with_db("blobs", flip_blob, ekey);
  }
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "corrupt");
  wire_get(fd, &key, &items[0].hash, 1, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->get->n_blobs, 0); /* never sent */
  ASSERT_EQ(rep.resp->get->dropped, 1);
  ASSERT_EQ(rep.resp->get->n_missing, 1);
  wire_reply_free(&rep);
  /* Verify finds the other one; repair removes it. */
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Verify v = PCACHEPB__VERIFY__INIT;
    v.repair = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
    req.verify = &v;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->verify->n_problems, 1);
    ASSERT_ERR(rep.resp->verify->problems[0]->status, PCACHE_ECHECKSUM);
    ASSERT_MEMEQ(rep.resp->verify->problems[0]->state_hash.data, items[1].hash.bytes, 16);
    ASSERT_EQ(rep.resp->verify->removed, 1);
    wire_reply_free(&rep);
  }
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->checksum_failures, 1);
  ASSERT_EQ(rep.resp->stats->entries, 0); /* the Get's drop went through first */
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);

  /* Unknown format version: moved aside, a fresh store serves. */
  with_db("info", set_format, NULL);
  ASSERT_EQ(test_count_aside(&env), 0);
  test_daemon_start(&env, NULL);
  ASSERT_EQ(test_count_aside(&env), 1);
  ASSERT_EQ(entries_now(), 0);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);

  /* Garbage data.mdb: same. Wait a second so the aside name differs. */
  sleep(1);
  {
    char path[400], junk[8192];
    int jf;
    snprintf(path, sizeof path, "%s/data.mdb", env.data_dir);
    memset(junk, 0x5a, sizeof junk);
    jf = open(path, O_WRONLY | O_TRUNC);
    ASSERT_GE(jf, 0);
    ASSERT_EQ(write(jf, junk, sizeof junk), (ssize_t)sizeof junk);
    close(jf);
  }
  test_daemon_start(&env, NULL);
  ASSERT_EQ(test_count_aside(&env), 2);
  ASSERT_EQ(entries_now(), 0);
  fd = wire_open(&env, "corrupt");
  wire_put(fd, &key, items, 1, &rep);
  ASSERT_EQ(rep.resp->put->stored, 1);
  wire_reply_free(&rep);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  wire_item_free(&items[0]);
  wire_item_free(&items[1]);
  test_env_cleanup(&env);
  return 0;
}
