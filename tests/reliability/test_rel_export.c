/* Export's memory (issue 12, section 7): the daemon streams the archive
 * into the reply's memfd, so its heap (RssAnon, sampled while the export
 * runs) does not grow with the store; it took twice the store before. A
 * store of 5,000 entries is exported in several slices, whole. */
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/archive.h"
#include "rel_util.h"
#include "test.h"

#define BIG 120
#define BIG_SIZE (256u << 10)
#define SMALL 5000

static test_env env;

/* Exports everything; returns the entries, and the peak RssAnon seen. */
static uint64_t export_all(int fd, long *ret_peak_kb, size_t *ret_size) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Export ex = PCACHEPB__EXPORT__INIT;
  wire_reply rep;
  struct pollfd pfd = {fd, POLLIN, 0};
  long peak = 0;
  uint64_t n;
  req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
  req.export = &ex;
  ASSERT_OK(wire_send(fd, &req));
  while (poll(&pfd, 1, 0) == 0) {
    long a = rel_anon_kb(env.daemon_pid);
    if (a > peak)
      peak = a;
    usleep(200);
  }
  ASSERT_OK(wire_recv(fd, &rep));
  ASSERT_EQ(rep.resp->status, 0);
  n = rep.resp->export->entries;
  *ret_size = rep.resp->export->archive_size;
  wire_reply_free(&rep);
  *ret_peak_kb = peak;
  return n;
}

int main(void) {
  pcache__devkey key;
  wire_reply rep;
  long anon0, peak;
  size_t size;
  int fd;

  test_env_init(&env, "rel-export");
  wire_guard(&env);
  test_daemon_start(&env, NULL);
  wire_devkey(5, &key);
  fd = wire_open(&env, "exporter");
  for (unsigned i = 0; i < BIG; i++) {
    wire_item item;
    wire_item_make(&item, &key, i, BIG_SIZE);
    wire_put(fd, &key, &item, 1, &rep);
    ASSERT_EQ(rep.resp->put->stored, 1);
    wire_reply_free(&rep);
    wire_item_free(&item);
  }
  /* Settle the heap after the Puts, then export 30 MiB. */
  (void)export_all(fd, &peak, &size);
  anon0 = rel_anon_kb(env.daemon_pid);
  ASSERT_EQ(export_all(fd, &peak, &size), BIG);
  printf("export of %u entries (%zu bytes): RssAnon %ld KiB before, peak %ld KiB during\n", BIG,
         size, anon0, peak);
  rel_figure("export_bytes", "%zu", size);
  rel_figure("export_anon_kb_before", "%ld", anon0);
  rel_figure("export_anon_kb_peak", "%ld", peak);
  /* Not the archive's size (30 MiB) or twice it: a record at a time. */
  if (!REL_SANITIZED)
    ASSERT_LT(peak - anon0, 8 * 1024);

  /* Many small entries: several slices, every entry once. */
  for (unsigned i = 0; i < SMALL; i += 500) {
    wire_item items[500];
    for (unsigned j = 0; j < 500; j++)
      wire_item_make(&items[j], &key, 100000 + i + j, 64);
    wire_put(fd, &key, items, 500, &rep);
    ASSERT_EQ(rep.resp->put->stored, 500);
    wire_reply_free(&rep);
    for (unsigned j = 0; j < 500; j++)
      wire_item_free(&items[j]);
  }
  ASSERT_EQ(export_all(fd, &peak, &size), BIG + SMALL);

  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
