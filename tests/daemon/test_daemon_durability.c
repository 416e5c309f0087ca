/* Acknowledged Puts survive a crash (SIGKILL right after the acks), SIGTERM
 * exits 0, and concurrent Puts from several connections share commits. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "wire.h"

enum { THREADS = 6, PER_THREAD = 20 };

static test_env env;
static pcache__devkey key;

static void *putter(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  int fd = wire_open(&env, "durable");
  for (unsigned i = 0; i < PER_THREAD; i++) {
    wire_item it;
    wire_reply rep;
    wire_item_make(&it, &key, t * 1000 + i, 200);
    wire_put(fd, &key, &it, 1, &rep);
    ASSERT_EQ(rep.resp->put->stored, 1);
    wire_reply_free(&rep);
    wire_item_free(&it);
  }
  close(fd);
  return NULL;
}

int main(void) {
  pthread_t th[THREADS];
  pcache__hash *hashes = calloc(THREADS * PER_THREAD, sizeof *hashes);
  wire_reply rep;
  int fd, status;

  test_env_init(&env, "durability");
  wire_guard(&env);
  wire_devkey(4, &key);
  test_daemon_start(&env, NULL);

  for (uintptr_t t = 0; t < THREADS; t++)
    ASSERT_EQ(pthread_create(&th[t], NULL, putter, (void *)t), 0);
  for (int t = 0; t < THREADS; t++)
    pthread_join(th[t], NULL);

  fd = wire_open(&env, "durable");
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->puts, THREADS * PER_THREAD);
  fprintf(stderr, "group commit: %llu puts in %llu commits\n",
          (unsigned long long)rep.resp->stats->puts, (unsigned long long)rep.resp->stats->commits);
  ASSERT_LT(rep.resp->stats->commits, rep.resp->stats->puts);
  wire_reply_free(&rep);
  close(fd);

  /* Crash right after the last ack: nothing acknowledged may be lost. */
  status = test_daemon_stop(&env, SIGKILL);
  ASSERT_TRUE(WIFSIGNALED(status));
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "durable");
  for (unsigned t = 0; t < THREADS; t++)
    for (unsigned i = 0; i < PER_THREAD; i++) {
      uint8_t *desc;
      size_t size, code_size;
      pcache__hash mod;
      wire_spirv(0, &code_size, &mod);
      wire_desc(PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, t * 1000 + i, &mod, &desc, &size,
                &hashes[t * PER_THREAD + i]);
      free(desc);
    }
  wire_get(fd, &key, hashes, THREADS * PER_THREAD > 4096 ? 4096 : THREADS * PER_THREAD, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->get->n_blobs, THREADS * PER_THREAD);
  ASSERT_EQ(rep.resp->get->n_missing, 0);
  wire_reply_free(&rep);
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->stats->entries, THREADS * PER_THREAD);
  ASSERT_EQ(rep.resp->stats->modules, 1);
  wire_reply_free(&rep);
  close(fd);

  /* SIGTERM: a clean exit, status 0, the socket file removed. */
  status = test_daemon_stop(&env, SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  ASSERT_TRUE(access(env.socket_path, F_OK) != 0);
  free(hashes);
  test_env_cleanup(&env);
  return 0;
}
