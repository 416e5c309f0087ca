/* Opening a client, and creating a device that leaves the daemon's blobs
 * to its upload thread (a driver-first device, PCACHE_PREFETCH=background),
 * wait for no answer from the daemon (docs/client.md, "Configuration" and
 * "The start-up prefetch"): the Hello, the reply window and the segment
 * are answered later, to the first call that needs them.
 *   - A daemon stopped with SIGSTOP takes connections and answers none:
 *     pcache_client_open and that pcache_device_create return far within
 *     the client's timeout, which a waited answer would have taken whole.
 *   - A device destroyed while its upload thread waits for the segment
 *     (and the Hello's answer) cancels that wait without counting it
 *     against the daemon: the connection is started again at once (the
 *     first cancel within a second), and woken, pcache_client_connected
 *     reads its Hello's answer, 1.
 *   - The next device works: its misses compile and reach the daemon.
 *   - A forked child does not speak on the parent's connection: it finds
 *     the daemon disabled, and the Hello's answer is left to the parent. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define TIMEOUT_MS 3000
/* Far below the timeout: none of these calls may have waited for it. */
#define QUICK_MS 1000

int main(void) {
  test_env env;
  util_app a;
  pcache_device *first;
  pcache_stats st;
  uint64_t t0;

  test_env_init(&env, "client-open");
  test_daemon_start(&env, NULL);
  test_daemon_pause(&env);

  t0 = util_now_ms();
  a.client = util_client(TIMEOUT_MS);
  ASSERT_LT(util_now_ms() - t0, QUICK_MS);

  setenv("PCACHE_PREFETCH", "background", 1);
  test_vk_init(&a.vk);
  a.info = test_vk_device_info(&a.vk);
  t0 = util_now_ms();
  ASSERT_OK(pcache_device_create(a.client, &a.info, &first));
  ASSERT_LT(util_now_ms() - t0, QUICK_MS);
  /* Its upload thread is in the segment's request by now. */
  nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
  t0 = util_now_ms();
  pcache_device_destroy(first);
  ASSERT_LT(util_now_ms() - t0, QUICK_MS);

  kill(env.daemon_pid, SIGCONT);
  ASSERT_TRUE(pcache_client_connected(a.client));
  ASSERT_OK(pcache_device_create(a.client, &a.info, &a.device));
  test_objects_create(&a.o, a.device);
  util_build_set(a.device, &a.o, 4, 1, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.compiles, 5);
  ASSERT_EQ(st.uploaded, 5);
  util_app_close(&a);
  ASSERT_EQ(util_count_entries(), 5);

  {
    pcache_client *shared = util_client(TIMEOUT_MS);
    int status;
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0)
      _exit(pcache_client_connected(shared) == 0 ? 0 : 1);
    ASSERT_EQ(waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ASSERT_TRUE(pcache_client_connected(shared));
    pcache_client_close(shared);
  }
  test_env_cleanup(&env);
  return 0;
}
