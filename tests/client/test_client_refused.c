/* A daemon that refuses the connection, with its answer to the Hello that
 * pcache_client_open sent without waiting (docs/client.md,
 * "Configuration"): pcached at --max-connections 1, its one connection
 * busy (it spoke less than a second ago, so it is not closed for the
 * newcomer). Opening still succeeds at once; pcache_client_connected reads
 * the refusal, says 0, and the log names it; the library then works
 * locally, its misses compiled. */
#include <pthread.h>
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
  busy = test_open(&env, "busy", 5000);
  ASSERT_GE(busy, 0);

  opts.timeout_ms = 2000;
  opts.log_func = keep_log;
  opts.log_level = PCACHE_SEVERITY_INFO;
  ASSERT_OK(pcache_client_open(&opts, &client));
  ASSERT_EQ(pcache_client_connected(client), 0);
  pthread_mutex_lock(&said_lock);
  ASSERT_TRUE(strstr(said, pcache_strerror(PCACHE_ETOO_MANY_CONNECTIONS)) != NULL);
  pthread_mutex_unlock(&said_lock);

  test_vk_init(&vk);
  info = test_vk_device_info(&vk);
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
