/* The layer says once per process that it is inactive (docs/layer.md,
 * "When it is off"): a program that makes three instances and devices
 * while no pcached listens gets one warning on stderr, not three, and
 * still gets its devices. layer_inactive.sh covers the reasons and the
 * silences through pcache-demo. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "test.h"
#include "vk.h"

static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)); p++)
    n++;
  return n;
}

int main(void) {
  test_env env;
  char path[400], text[16384];
  test_stderr redirected;

  test_env_init(&env, "layer-inactive");
  setenv("XDG_DATA_HOME", PCACHE_LAYER_DATA_HOME, 1);
  setenv("PCACHE_LAYER", "1", 1);
  unsetenv("PCACHE_LOG");
  unsetenv("PCACHE_DISABLE");
  unsetenv("PCACHE_LAYER_DISABLE");
  /* No daemon was started: PCACHE_SOCKET names a socket nobody made. */
  snprintf(path, sizeof path, "%s/stderr", env.root);
  test_stderr_begin(&redirected, path);
  for (int i = 0; i < 3; i++) {
    test_vk vk;
    test_vk_init(&vk);
    test_vk_fini(&vk);
  }
  test_stderr_end(&redirected, path, text, sizeof text);
  fprintf(stderr, "what the program's stderr got:\n%s", text);
  ASSERT_EQ(count(text, "the Vulkan layer is inactive"), 1);
  ASSERT_TRUE(strstr(text, env.socket_path) != NULL);
  ASSERT_TRUE(strstr(text, "systemctl --user enable --now pcached.socket") != NULL);
  test_env_cleanup(&env);
  return 0;
}
