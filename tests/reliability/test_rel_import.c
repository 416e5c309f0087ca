/* One client's large import does not stall the single writer (issue 12,
 * section 5). An archive of 30,000 entries, each with its own SPIR-V
 * module, is imported by one client; once the writer has committed the
 * import's first slice, another client's Put is answered while the import
 * is still running, and the import ends with every entry stored, in more
 * than one commit. Before the fix the import was one transaction (and a
 * linear module scan per entry): nothing committed until it ended. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/alloc.h"
#include "proto/archive.h"
#include "common/blob.h"
#include "rel_util.h"
#include "test.h"

#define N 30000

static uint64_t commits(int fd) {
  wire_reply rep;
  uint64_t n;
  wire_stats(fd, &rep);
  n = rep.resp->stats->commits;
  wire_reply_free(&rep);
  return n;
}

static void make_archive(const pcache__devkey *key, uint8_t **ret_data, size_t *ret_size) {
  pcache__archive_writer *w;
  uint8_t *blob = wire_blob(key, 64, 1);
  ASSERT_OK(pcache__archive_writer_new(&w));
  for (uint64_t i = 0; i < N; i++) {
    uint8_t code[16] = {0x03, 0x02, 0x23, 0x07};
    pcache__hash mh;
    memcpy(code + 8, &i, sizeof i);
    pcache__hash128(code, sizeof code, &mh);
    ASSERT_OK(pcache__archive_add_module(w, &mh, code, sizeof code));
    rel_archive_entry(w, key, i, blob, 64, &mh);
  }
  ASSERT_OK(pcache__archive_finish(w, ret_data, ret_size));
  pcache__archive_writer_free(w);
  free(blob);
}

int main(void) {
  test_env env;
  pcache__devkey key;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import imp = PCACHEPB__IMPORT__INIT;
  wire_item item;
  wire_reply rep;
  struct pollfd pfd;
  uint8_t *archive;
  size_t size;
  uint64_t c0, t0, put_ms, slices;
  int importer, other;

  test_env_init(&env, "rel-import");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  wire_devkey(4, &key);
  make_archive(&key, &archive, &size);
  importer = wire_open(&env, "importer");
  other = wire_open(&env, "other");
  c0 = commits(other);

  imp.archive.data = archive;
  imp.archive.len = size;
  req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  req.import = &imp;
  ASSERT_OK(wire_send(importer, &req));
  /* The import's first slice is committed: it is under way. */
  t0 = rel_now_ms();
  while (commits(other) == c0) {
    ASSERT_LT(rel_now_ms() - t0, 60000);
    usleep(1000);
  }

  /* Another client's Put is answered while the import still runs. */
  t0 = rel_now_ms();
  wire_item_make(&item, &key, 1, 256);
  wire_put(other, &key, &item, 1, &rep);
  put_ms = rel_now_ms() - t0;
  ASSERT_EQ(rep.resp->put->stored, 1);
  wire_reply_free(&rep);
  wire_item_free(&item);
  pfd.fd = importer;
  pfd.events = POLLIN;
  pfd.revents = 0;
  ASSERT_EQ(poll(&pfd, 1, 0), 0); /* no Import reply yet */

  t0 = rel_now_ms();
  ASSERT_OK(wire_recv(importer, &rep));
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->import->accepted, N);
  ASSERT_EQ(rep.resp->import->refused, 0);
  wire_reply_free(&rep);
  slices = commits(other) - c0;
  printf("import of %d entries (%zu bytes): %llu commits; a Put during it waited %llu ms, "
         "the import went on %llu ms after\n",
         N, size, (unsigned long long)slices, (unsigned long long)put_ms,
         (unsigned long long)(rel_now_ms() - t0));
  rel_figure("import_commits", "%llu", (unsigned long long)slices);
  rel_figure("import_put_wait_ms", "%llu", (unsigned long long)put_ms);
  /* 60,000 records in slices of at most 4096, and the Put's commit. */
  ASSERT_GE(slices, 2 * N / 4096);

  pcache__free(archive);
  close(importer);
  ASSERT_EQ(rel_verify(other), 0);
  close(other);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
