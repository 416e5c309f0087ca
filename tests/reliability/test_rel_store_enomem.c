/* A resource error is not damage (hostile pass after issue 30, D1): pcached
 * started under an address-space limit its LMDB map does not fit (ulimit
 * -v, a container's limit) got ENOMEM from LMDB, called a healthy store
 * "corrupt", moved it aside twice and exited; after a normal restart
 * the store was empty. Now it leaves the store as it is, logs the cause
 * and what to change, and exits non-zero; a normal restart serves every
 * entry. */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rel_util.h"
#include "test.h"

#define ENTRIES 20

static uint64_t entries_now(test_env *env) {
  int fd = wire_open(env, "enomem");
  uint64_t n = wire_stats_of(fd).entries;
  close(fd);
  return n;
}

int main(void) {
  const char *args[] = {"--socket", NULL, "--data-dir", NULL, "--map-size", "16G", NULL};
  struct rlimit was, as;
  pcache__devkey key;
  test_env env;
  char out[8192];
  int status;

  /* A sanitizer reserves terabytes of shadow memory: it cannot start
   * under an address-space limit at all. */
  if (REL_SANITIZED) {
    fprintf(stderr, "skipped: needs RLIMIT_AS, which sanitizers cannot run under\n");
    return 77;
  }
  test_env_init(&env, "store_enomem");
  test_daemon_start(&env, NULL);
  wire_devkey(1, &key);
  for (int i = 0; i < ENTRIES; i++) {
    int fd = wire_open(&env, "enomem");
    wire_item it;
    wire_reply rep;
    wire_item_make(&it, &key, 500 + (uint64_t)i, 4096);
    wire_put(fd, &key, &it, 1, &rep);
    ASSERT_EQ(rep.resp->put->stored, 1);
    wire_reply_free(&rep);
    wire_item_free(&it);
    close(fd);
  }
  ASSERT_EQ(entries_now(&env), ENTRIES);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);

  /* A 16 GiB map under a 2 GiB address-space limit: ENOMEM. */
  args[1] = env.socket_path;
  args[3] = env.data_dir;
  ASSERT_EQ(getrlimit(RLIMIT_AS, &was), 0);
  as = was;
  as.rlim_cur = 2ull << 30;
  ASSERT_EQ(setrlimit(RLIMIT_AS, &as), 0);
  status = test_pcached_run(&env, args, out, sizeof out);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &was), 0);
  fprintf(stderr, "%s", out);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0);
  ASSERT_TRUE(strstr(out, "Cannot allocate memory") != NULL);
  ASSERT_TRUE(strstr(out, "left as it is") != NULL);
  ASSERT_TRUE(strstr(out, "ulimit -v") != NULL);
  ASSERT_EQ(test_count_aside(&env), 0);

  /* The advice works: without the limit, the same store serves. */
  test_daemon_start(&env, NULL);
  ASSERT_EQ(test_count_aside(&env), 0);
  ASSERT_EQ(entries_now(&env), ENTRIES);
  test_env_cleanup(&env);
  return 0;
}
