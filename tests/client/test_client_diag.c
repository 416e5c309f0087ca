/* What libpcache tells an app (issue 15, points 4 and 7): the app name it
 * files entries under and which setting wins, and its messages: through
 * the log function in the client options and through $PCACHE_LOG to
 * stderr, naming the object or the sType that kept a pipeline out of the
 * cache, with repeats held back. No daemon: all of it works locally. */
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

/* ------------------------------------------------------------ app name */

static void expect_name(const pcache_client_options *o, const char *want) {
  pcache_client *client;
  ASSERT_OK(pcache_client_open(o, &client));
  ASSERT_STREQ(pcache_client_app_name(client), want);
  pcache_client_close(client);
}

static void test_app_name(void) {
  pcache_client_options o = PCACHE_STRUCT_INIT(pcache_client_options);
  char comm[64] = "";
  FILE *f = fopen("/proc/self/comm", "r");
  ASSERT_TRUE(f && fgets(comm, sizeof comm, f));
  fclose(f);
  comm[strcspn(comm, "\n")] = '\0';
  o.disable_daemon = 1;
  unsetenv("PCACHE_APP_NAME");
  expect_name(&o, comm); /* nothing given: the program's name */
  o.application_name = "vulkanExample";
  expect_name(&o, "vulkanExample"); /* the deprecated field, alone */
  o.app_name = "sample-pipelines";
  expect_name(&o, "sample-pipelines"); /* app_name wins over it */
  o.app_name = "";
  expect_name(&o, "vulkanExample"); /* empty is unset */
  o.app_name = "sample-pipelines";
  setenv("PCACHE_APP_NAME", "from-env", 1);
  expect_name(&o, "from-env"); /* the environment overrides both */
  setenv("PCACHE_APP_NAME", "", 1);
  expect_name(&o, "sample-pipelines"); /* empty is unset */
  unsetenv("PCACHE_APP_NAME");
}

/* ------------------------------------------------------------- messages */

#define MAX_MESSAGES 64

typedef struct captured {
  pthread_mutex_t lock;
  size_t n;
  pcache_severity level[MAX_MESSAGES];
  char text[MAX_MESSAGES][512];
} captured;

static void capture(void *user_data, pcache_severity level, const char *message) {
  captured *c = user_data;
  pthread_mutex_lock(&c->lock);
  if (c->n < MAX_MESSAGES) {
    c->level[c->n] = level;
    snprintf(c->text[c->n], sizeof c->text[c->n], "%s", message);
  }
  c->n++;
  pthread_mutex_unlock(&c->lock);
}

/* How many captured messages contain every one of the strings. */
static size_t count_with(captured *c, const char *a, const char *b) {
  size_t n = 0;
  for (size_t i = 0; i < c->n && i < MAX_MESSAGES; i++)
    n += strstr(c->text[i], a) && (!b || strstr(c->text[i], b));
  return n;
}

static VkShaderModule plain_module(const test_vk *vk, const char *name) {
  size_t size;
  const uint32_t *code = test_vk_shader_code(name, &size);
  VkShaderModuleCreateInfo ci = {
      .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = size, .pCode = code};
  VkShaderModule m;
  ASSERT_VK(vkCreateShaderModule(vk->device, &ci, NULL, &m));
  return m;
}

#define FRAMES 100
#define UNKNOWN_STYPE 1000999000u /* no such struct: an extension pcache cannot know */

/* A module made without the wrapper, used every frame, then a create info
 * chaining a struct pcache does not know: each says what it is, once. */
static void make_unhashable(const test_vk *vk, pcache_device *device, const test_objects *o,
                            VkShaderModule *ret_module) {
  test_graphics g;
  VkPipeline p;
  VkBaseInStructure unknown = {.sType = (VkStructureType)UNKNOWN_STYPE};
  *ret_module = plain_module(vk, "tri.vert");
  for (int frame = 0; frame < FRAMES; frame++) {
    test_graphics_info(&g, o, 0);
    g.stages[0].module = *ret_module;
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
    pcache_device_end_frame(device);
  }
  test_graphics_info(&g, o, 1);
  g.multisample.pNext = &unknown;
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
}

static void test_log_func(const test_vk *vk) {
  static captured c = {.lock = PTHREAD_MUTEX_INITIALIZER};
  pcache_client_options o = PCACHE_STRUCT_INIT(pcache_client_options);
  pcache_device_info info = test_vk_device_info(vk);
  pcache_client *client;
  pcache_device *device;
  test_objects objs;
  VkShaderModule module;
  pcache_stats st;
  char handle[32];
  o.app_name = "pcache-diag-test";
  o.disable_daemon = 1;
  o.log_func = capture;
  o.log_user_data = &c;
  o.log_level = PCACHE_SEVERITY_WARNING;
  ASSERT_OK(pcache_client_open(&o, &client));
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&objs, device);
  make_unhashable(vk, device, &objs, &module);
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.unhashable, FRAMES + 1);

  /* 100 uncached pipelines through one unknown module: one message, which
   * names the module by handle and type; one for the unknown struct. */
  snprintf(handle, sizeof handle, "0x%" PRIx64, (uint64_t)module);
  for (size_t i = 0; i < c.n && i < MAX_MESSAGES; i++)
    fprintf(stderr, "message: %s\n", c.text[i]);
  ASSERT_EQ(count_with(&c, "shader module", handle), 1);
  ASSERT_EQ(count_with(&c, "unrecorded_shader_module", "pcache_create_shader_module"), 1);
  ASSERT_EQ(count_with(&c, "sType 1000999000", "pnext"), 1);
  ASSERT_EQ(c.n, 2);
  ASSERT_EQ(c.level[0], PCACHE_SEVERITY_WARNING);

  test_objects_destroy(&objs);
  pcache_device_destroy(device);
  vkDestroyShaderModule(vk->device, module, NULL);
  /* Closing gives the repeats held back, with their count. */
  pcache_client_close(client);
  ASSERT_EQ(count_with(&c, handle, "99 times more"), 1);
  ASSERT_EQ(c.n, 3);
}

/* $PCACHE_LOG: the same messages on stderr, for a process without a
 * client too (a device context made with client NULL). */
static void test_env_stderr(const test_vk *vk, const char *dir) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  test_objects objs;
  VkShaderModule module;
  char path[512], text[8192], handle[32];
  test_stderr redirected;
  snprintf(path, sizeof path, "%s/stderr.txt", dir);
  test_stderr_begin(&redirected, path);
  setenv("PCACHE_LOG", "warning", 1);
  ASSERT_OK(pcache_device_create(NULL, &info, &device));
  test_objects_create(&objs, device);
  make_unhashable(vk, device, &objs, &module);
  test_objects_destroy(&objs);
  pcache_device_destroy(device);
  unsetenv("PCACHE_LOG");
  ASSERT_GT(test_stderr_end(&redirected, path, text, sizeof text), 0);
  fprintf(stderr, "stderr with PCACHE_LOG=warning:\n%s", text);
  snprintf(handle, sizeof handle, "0x%" PRIx64, (uint64_t)module);
  ASSERT_TRUE(strstr(text, "warning: pipeline not cached (unrecorded_shader_module)") != NULL);
  ASSERT_TRUE(strstr(text, handle) != NULL);
  ASSERT_TRUE(strstr(text, "sType 1000999000") != NULL);
  /* One line each, not one a frame. */
  ASSERT_TRUE(strstr(strstr(text, handle) + 1, handle) == NULL);
  vkDestroyShaderModule(vk->device, module, NULL);
}

int main(void) {
  test_env env;
  test_vk vk;
  test_env_init(&env, "client-diag");
  test_app_name();
  test_vk_init(&vk);
  test_log_func(&vk);
  test_env_stderr(&vk, env.root);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
