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
  int fd, saved;
  ssize_t n;

  test_env_init(&env, "layer-inactive");
  setenv("XDG_DATA_HOME", PCACHE_LAYER_DATA_HOME, 1);
  setenv("PCACHE_LAYER", "1", 1);
  unsetenv("PCACHE_LOG");
  unsetenv("PCACHE_DISABLE");
  unsetenv("PCACHE_LAYER_DISABLE");
  /* No daemon was started: PCACHE_SOCKET names a socket nobody made. */
  snprintf(path, sizeof path, "%s/stderr", env.root);
  fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  ASSERT_TRUE(fd >= 0);
  saved = dup(STDERR_FILENO);
  ASSERT_TRUE(dup2(fd, STDERR_FILENO) >= 0);
  for (int i = 0; i < 3; i++) {
    test_vk vk;
    test_vk_init(&vk);
    test_vk_fini(&vk);
  }
  ASSERT_TRUE(dup2(saved, STDERR_FILENO) >= 0);
  close(saved);
  close(fd);

  fd = open(path, O_RDONLY | O_CLOEXEC);
  ASSERT_TRUE(fd >= 0);
  n = read(fd, text, sizeof text - 1);
  close(fd);
  ASSERT_TRUE(n >= 0);
  text[n] = '\0';
  fprintf(stderr, "what the program's stderr got:\n%s", text);
  ASSERT_EQ(count(text, "the Vulkan layer is inactive"), 1);
  ASSERT_TRUE(strstr(text, env.socket_path) != NULL);
  ASSERT_TRUE(strstr(text, "systemctl --user enable --now pcached.socket") != NULL);
  test_env_cleanup(&env);
  return 0;
}
