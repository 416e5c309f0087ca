/* A read-only client that reads the same entries Get after Get (issue 12,
 * section 5): its hits are merged into one pending touch per entry, so the
 * daemon's heap (RssAnon) does not grow with the number of hits, and each
 * entry's hit count still adds them all up once they are written. (A Get
 * that names one entry many times costs one lookup and one hit since
 * duplicates are dropped, section 1; so the Gets here name many distinct
 * entries, 1.6 M hits in all.) */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "rel_util.h"
#include "test.h"

#define NAMES 4096
/* Sanitizer builds only check the counts (the heap bound is not asserted
 * there), with fewer Gets: TSan makes each one tens of times slower. */
#define GETS (REL_SANITIZED ? 20 : 400)
#define WARMUP (REL_SANITIZED ? 2 : 20)

int main(void) {
  /* A long flush interval: every hit of the run waits in memory. */
  const char *args[] = {"--flush-interval", "600000", NULL};
  static pcache__hash hashes[NAMES];
  static wire_item items[NAMES];
  test_env env;
  pcache__devkey key;
  wire_reply rep;
  long anon0, anon;
  int fd, reader;

  test_env_init(&env, "rel-touch");
  wire_guard(&env);
  test_daemon_start(&env, args);
  wire_devkey(3, &key);
  fd = wire_open(&env, "writer");
  for (size_t i = 0; i < NAMES; i++) {
    wire_item_make(&items[i], &key, i + 1, 64);
    hashes[i] = items[i].hash;
  }
  wire_put(fd, &key, items, NAMES, &rep);
  ASSERT_EQ(rep.resp->put->stored, NAMES);
  wire_reply_free(&rep);

  reader = wire_open(&env, "reader");
  /* Warm up the reply path, then measure. */
  for (int i = 0; i < WARMUP; i++) {
    wire_get(reader, &key, hashes, NAMES, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->get->n_blobs, NAMES);
    wire_reply_free(&rep);
  }
  anon0 = rel_anon_kb(env.daemon_pid);
  for (int i = 0; i < GETS; i++) {
    wire_get(reader, &key, hashes, NAMES, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    wire_reply_free(&rep);
  }
  anon = rel_anon_kb(env.daemon_pid);
  printf("%d Gets naming the same %d entries: RssAnon %ld -> %ld KiB\n", GETS, NAMES, anon0,
         anon);
  rel_figure("touch_hits", "%d", GETS * NAMES);
  rel_figure("touch_anon_kb_before", "%ld", anon0);
  rel_figure("touch_anon_kb_after", "%ld", anon);
  /* 1.6 M hits were 100 MiB of pending records; 4096 merged records are
   * a few hundred KiB. A few MiB covers the allocator's slack. */
  if (!REL_SANITIZED)
    ASSERT_LT(anon - anon0, 4 * 1024);

  /* The hits are all counted once written (at shutdown). */
  close(reader);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "writer");
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__List l = PCACHEPB__LIST__INIT;
    l.entries = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_LIST;
    req.list = &l;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->list->n_entries, NAMES);
    for (size_t i = 0; i < rep.resp->list->n_entries; i++)
      ASSERT_GE(rep.resp->list->entries[i]->hits, (uint64_t)(GETS + WARMUP));
    wire_reply_free(&rep);
  }
  close(fd);
  for (size_t i = 0; i < NAMES; i++)
    wire_item_free(&items[i]);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
