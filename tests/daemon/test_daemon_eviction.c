/* A tiny --max-size keeps the most recently used entries: a Get makes an
 * entry recent, so the next Put evicts the one nobody asked for. */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

enum { N = 8, BLOB = 1000 };

int main(void) {
  /* Room for about 5 entries of ~1.1 KB (blob + description) and their
   * index records (~230 bytes each: metadata, LRU, app index). */
  const char *args[] = {"--max-size", "7000", NULL};
  test_env env;
  pcache__devkey key;
  wire_item items[N];
  wire_reply rep;
  uint64_t evicted = 0;
  int fd;

  test_env_init(&env, "eviction");
  wire_guard(&env);
  test_daemon_start(&env, args);
  fd = wire_open(&env, "evict");
  wire_devkey(5, &key);
  for (int i = 0; i < N; i++)
    wire_item_make(&items[i], &key, 500 + (uint64_t)i, BLOB);

  for (int i = 0; i < 5; i++) {
    wire_put(fd, &key, &items[i], 1, &rep);
    ASSERT_EQ(rep.resp->put->stored, 1);
    evicted += rep.resp->put->evicted;
    wire_reply_free(&rep);
    usleep(2000);
  }
  ASSERT_EQ(evicted, 0);
  /* Use item 0 (the oldest put): it must survive the next evictions. */
  wire_get(fd, &key, &items[0].hash, 1, &rep);
  ASSERT_EQ(rep.resp->get->n_blobs, 1);
  wire_reply_free(&rep);
  usleep(2000);
  for (int i = 5; i < N; i++) {
    wire_put(fd, &key, &items[i], 1, &rep);
    ASSERT_EQ(rep.resp->put->stored, 1);
    evicted += rep.resp->put->evicted;
    wire_reply_free(&rep);
    usleep(2000);
  }
  ASSERT_GE(evicted, 3);

  for (int i = 0; i < N; i++) {
    int want = i == 0 || i >= 5 || (i == 4 && evicted == 3);
    wire_get(fd, &key, &items[i].hash, 1, &rep);
    if ((int)rep.resp->get->n_blobs != want)
      TEST_FAIL_("entry %d: present %zu, expected %d (evicted %llu)", i, rep.resp->get->n_blobs,
                 want, (unsigned long long)evicted);
    wire_reply_free(&rep);
  }
  wire_stats(fd, &rep);
  ASSERT_LE(rep.resp->stats->bytes_used, 7000);
  ASSERT_EQ(rep.resp->stats->evictions, evicted);
  wire_reply_free(&rep);
  for (int i = 0; i < N; i++)
    wire_item_free(&items[i]);
  close(fd);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
