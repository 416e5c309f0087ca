/* A daemon that refuses the connection, with its answer to the Hello that
 * pcache_client_open sent without waiting (docs/client.md,
 * "Configuration"): pcached at --max-connections 1, its one connection
 * busy (it spoke less than a second ago, so it is not closed for the
 * newcomer).
 *   - A device that asks the daemon nothing at creation (no segment, no
 *     prefetch): its upload thread reads the Hello's answer as it starts,
 *     so the refusal is said with no call of the app's.
 *   - Opening still succeeds at once; pcache_client_connected reads the
 *     refusal, says 0, and the log names it; the library then works
 *     locally, its misses compiled. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

static char said[4096];
/* Messages may come from the upload thread and the app's at once. */
static pthread_mutex_t said_lock = PTHREAD_MUTEX_INITIALIZER;

static void keep_log(void *user, pcache_severity severity, const char *message) {
  (void)user;
  (void)severity;
  pthread_mutex_lock(&said_lock);
  if (strlen(said) + strlen(message) + 2 < sizeof said) {
    strcat(said, message);
    strcat(said, "\n");
  }
  pthread_mutex_unlock(&said_lock);
}

static int refusal_said(void) {
  int r;
  pthread_mutex_lock(&said_lock);
  r = strstr(said, pcache_strerror(PCACHE_ETOO_MANY_CONNECTIONS)) != NULL;
  pthread_mutex_unlock(&said_lock);
  return r;
}

/* A connection of another process's kind that the daemon counts, freshly
 * spoken: the one --max-connections allows. The daemon may still be
 * closing the last one: asked again until it takes it. */
static int busy_open(const test_env *env) {
  int fd = -1;
  for (int i = 0; i < 200 && (fd = test_open(env, "busy", 5000)) < 0; i++)
    usleep(10 * 1000);
  ASSERT_GE(fd, 0);
  return fd;
}

int main(void) {
  const char *args[] = {"--max-connections", "1", NULL};
  test_env env;
  test_vk vk;
  pcache_device_info info;
  pcache_client_options opts = PCACHE_STRUCT_INIT(pcache_client_options);
  pcache_client *client;
  pcache_device *device;
  pcache_stats st;
  test_objects o;
  int busy;

  test_env_init(&env, "client-refused");
  test_daemon_start(&env, args);
  test_vk_init(&vk);
  info = test_vk_device_info(&vk);
  opts.timeout_ms = 2000;
  opts.log_func = keep_log;
  opts.log_level = PCACHE_SEVERITY_INFO;

  /* No call of the app's: the upload thread reads the refusal. */
  busy = busy_open(&env);
  setenv("PCACHE_NO_SEGMENT", "1", 1);
  setenv("PCACHE_NO_PREFETCH", "1", 1);
  ASSERT_OK(pcache_client_open(&opts, &client));
  ASSERT_OK(pcache_device_create(client, &info, &device));
  for (int i = 0; i < 300 && !refusal_said(); i++)
    usleep(10 * 1000);
  ASSERT_TRUE(refusal_said());
  pcache_device_destroy(device);
  pcache_client_close(client);
  unsetenv("PCACHE_NO_SEGMENT");
  unsetenv("PCACHE_NO_PREFETCH");
  close(busy);

  /* pcache_client_connected reads it. */
  pthread_mutex_lock(&said_lock);
  said[0] = '\0';
  pthread_mutex_unlock(&said_lock);
  busy = busy_open(&env);
  ASSERT_OK(pcache_client_open(&opts, &client));
  ASSERT_EQ(pcache_client_connected(client), 0);
  ASSERT_TRUE(refusal_said());
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&o, device);
  util_build_set(device, &o, 2, 1, NULL);
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 3);
  ASSERT_EQ(st.daemon_hits, 0);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
  pcache_client_close(client);
  test_vk_fini(&vk);
  close(busy);
  test_env_cleanup(&env);
  return 0;
}
