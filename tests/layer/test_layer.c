/* The Vulkan layer with a plain Vulkan program (this test links no pcache
 * code into its Vulkan path: its objects and pipelines are made with
 * vkCreate*, and the loader puts the layer in between). Against the real
 * pcached, in phases, each a fresh instance and device:
 *   1. a fresh daemon: every distinct hashable pipeline compiles and is
 *      uploaded; an unknown pNext is passed through and reported;
 *   2. the same daemon: every distinct pipeline is a daemon hit, nothing
 *      compiles;
 *   3. the daemon stalled (SIGSTOP): each call is bounded by the client's
 *      timeout, every pipeline still builds;
 *   4. the daemon killed: the same, with no daemon at all;
 *   5. PCACHE_LAYER_DISABLE=1: the layer is not loaded.
 * In each phase: a batch with a derivative naming its base by index, an app
 * cache that receives pipelines, is saved, and reloaded, and two threads
 * creating the same pipeline. While the daemon runs, `pcachectl layer`
 * shows each run's report as the daemon received it, with the counters of
 * the text report. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl_util.h"
#include "layer_util.h"
#include "test.h"
#include "vk.h"

#define N_BATCH 6   /* graphics variants 0..5 in one call */
#define N_APP 2     /* graphics variants 6..7 through the app cache */
#define N_COMPUTE 2 /* compute variants 0..1 */
#define RACE_VARIANT 9
#define UNKNOWN_VARIANT 8

typedef struct race_arg {
  VkDevice device;
  const VkGraphicsPipelineCreateInfo *info;
  VkPipeline pipeline;
  VkResult vr;
} race_arg;

static void *race(void *p) {
  race_arg *a = p;
  a->vr = vkCreateGraphicsPipelines(a->device, VK_NULL_HANDLE, 1, a->info, NULL, &a->pipeline);
  return NULL;
}

/* Which shared object a function the device hands out lives in. */
static int in_layer(VkDevice device, const char *name) {
  PFN_vkVoidFunction f = vkGetDeviceProcAddr(device, name);
  Dl_info info;
  ASSERT_TRUE(f != NULL);
  ASSERT_TRUE(dladdr((void *)f, &info) != 0 && info.dli_fname != NULL);
  return strstr(info.dli_fname, "libVkLayer_pcache") != NULL;
}

/* Nothing per draw goes through the layer: the device's functions for
 * recording and submitting are the next layer's (the driver's), while
 * pipeline creation is the layer's (which shows the check can tell). */
static void check_interception(VkDevice device) {
  static const char *const per_draw[] = {"vkCmdDraw",
                                         "vkCmdDrawIndexed",
                                         "vkCmdBindPipeline",
                                         "vkCmdBindDescriptorSets",
                                         "vkCmdDispatch",
                                         "vkQueueSubmit",
                                         "vkCmdBeginRenderPass",
                                         "vkCmdPushConstants",
                                         "vkBeginCommandBuffer",
                                         "vkCmdSetViewport"};
  for (size_t i = 0; i < sizeof per_draw / sizeof per_draw[0]; i++)
    if (in_layer(device, per_draw[i]))
      TEST_FAIL_("%s goes through the layer", per_draw[i]);
  ASSERT_TRUE(in_layer(device, "vkCreateGraphicsPipelines"));
  ASSERT_TRUE(in_layer(device, "vkCreateShaderModule"));
}

/* An allocator that counts, to see the program's callbacks reach the
 * driver through the layer. */
typedef struct counting {
  atomic_int allocs, frees;
} counting;

static void *VKAPI_CALL count_alloc(void *ud, size_t size, size_t align,
                                    VkSystemAllocationScope s) {
  void *p = NULL;
  (void)s;
  if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1) != 0)
    return NULL;
  atomic_fetch_add(&((counting *)ud)->allocs, 1);
  return p;
}

static void *VKAPI_CALL count_realloc(void *ud, void *old, size_t size, size_t align,
                                      VkSystemAllocationScope s) {
  void *p;
  (void)s;
  if (!old)
    return count_alloc(ud, size, align, s);
  if (!size) {
    atomic_fetch_add(&((counting *)ud)->frees, 1);
    free(old);
    return NULL;
  }
  p = realloc(old, size); /* the tests' drivers ask for small alignments */
  return p;
}

static void VKAPI_CALL count_free(void *ud, void *p) {
  if (!p)
    return;
  atomic_fetch_add(&((counting *)ud)->frees, 1);
  free(p);
}

/* One run of the "program". */
static void run_program(void) {
  test_vk vk;
  test_objects o;
  test_graphics g[N_BATCH + N_APP + 2];
  VkGraphicsPipelineCreateInfo batch[N_BATCH];
  VkPipeline batch_out[N_BATCH], app_out[N_APP], compute_out[N_COMPUTE], unknown, reloaded;
  test_compute c[N_COMPUTE];
  VkPipelineCacheCreateInfo cache_ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache app_cache, app_cache2;
  /* A struct no describer knows: the layer must pass the pipeline through. */
  VkBaseInStructure unknown_ext = {.sType = (VkStructureType)1000999000};
  race_arg ra[2];
  pthread_t threads[2];
  size_t size = 0;
  void *saved;

  test_vk_init(&vk);
  if (getenv("PCACHE_LAYER_DISABLE") == NULL)
    check_interception(vk.device);
  test_objects_create_plain(&o, vk.device);
  for (uint32_t i = 0; i < N_BATCH; i++) {
    test_graphics_info(&g[i], &o, i);
    batch[i] = g[i].info;
  }
  /* A derivative whose base is an earlier element of the same batch. */
  batch[0].flags |= VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT;
  batch[1].flags |= VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  batch[1].basePipelineIndex = 0;
  batch[1].basePipelineHandle = VK_NULL_HANDLE;
  ASSERT_VK(vkCreateGraphicsPipelines(vk.device, VK_NULL_HANDLE, N_BATCH, batch, NULL, batch_out));
  for (uint32_t i = 0; i < N_BATCH; i++)
    ASSERT_TRUE(batch_out[i] != VK_NULL_HANDLE);

  ASSERT_VK(vkCreatePipelineCache(vk.device, &cache_ci, NULL, &app_cache));
  for (uint32_t i = 0; i < N_APP; i++) {
    test_graphics_info(&g[N_BATCH + i], &o, N_BATCH + i);
    ASSERT_VK(vkCreateGraphicsPipelines(vk.device, app_cache, 1, &g[N_BATCH + i].info, NULL,
                                        &app_out[i]));
  }
  for (uint32_t i = 0; i < N_COMPUTE; i++) {
    test_compute_info(&c[i], &o, i);
    ASSERT_VK(
        vkCreateComputePipelines(vk.device, VK_NULL_HANDLE, 1, &c[i].info, NULL, &compute_out[i]));
  }

  test_graphics_info(&g[N_BATCH + N_APP], &o, UNKNOWN_VARIANT);
  unknown_ext.pNext = g[N_BATCH + N_APP].info.pNext;
  g[N_BATCH + N_APP].info.pNext = &unknown_ext;
  ASSERT_VK(vkCreateGraphicsPipelines(vk.device, VK_NULL_HANDLE, 1, &g[N_BATCH + N_APP].info, NULL,
                                      &unknown));

  test_graphics_info(&g[N_BATCH + N_APP + 1], &o, RACE_VARIANT);
  for (int t = 0; t < 2; t++) {
    ra[t] = (race_arg){.device = vk.device, .info = &g[N_BATCH + N_APP + 1].info};
    ASSERT_EQ(pthread_create(&threads[t], NULL, race, &ra[t]), 0);
  }
  for (int t = 0; t < 2; t++) {
    pthread_join(threads[t], NULL);
    ASSERT_VK(ra[t].vr);
    ASSERT_TRUE(ra[t].pipeline != VK_NULL_HANDLE);
  }
  ASSERT_TRUE(ra[0].pipeline != ra[1].pipeline); /* each call its own pipeline */

  /* The app saves its cache and a later "run" loads it. */
  ASSERT_VK(vkGetPipelineCacheData(vk.device, app_cache, &size, NULL));
  ASSERT_GT(size, 0);
  saved = malloc(size);
  ASSERT_TRUE(saved != NULL);
  ASSERT_VK(vkGetPipelineCacheData(vk.device, app_cache, &size, saved));
  cache_ci.initialDataSize = size;
  cache_ci.pInitialData = saved;
  ASSERT_VK(vkCreatePipelineCache(vk.device, &cache_ci, NULL, &app_cache2));
  ASSERT_VK(vkMergePipelineCaches(vk.device, app_cache2, 1, &app_cache));
  ASSERT_VK(vkCreateGraphicsPipelines(vk.device, app_cache2, 1, &g[N_BATCH].info, NULL, &reloaded));
  free(saved);

  /* The program's allocator reaches the driver through the layer: for the
   * objects and caches the layer intercepts, and for pipelines (which
   * lavapipe allocates from the device's allocator whatever it is given,
   * so only the balance can be checked there). */
  {
    counting counts = {0};
    VkAllocationCallbacks cb = {.pUserData = &counts,
                                .pfnAllocation = count_alloc,
                                .pfnReallocation = count_realloc,
                                .pfnFree = count_free};
    size_t code_size;
    const uint32_t *code = test_vk_shader_code("tri.vert", &code_size);
    VkShaderModuleCreateInfo smci = {
        .sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = code_size, .pCode = code};
    VkPipelineCacheCreateInfo pcci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    VkShaderModule module;
    VkPipelineCache counted_cache;
    VkPipeline own;
    ASSERT_VK(vkCreateShaderModule(vk.device, &smci, &cb, &module));
    ASSERT_VK(vkCreatePipelineCache(vk.device, &pcci, &cb, &counted_cache));
    ASSERT_GT(atomic_load(&counts.allocs), 1);
    /* batch[0]'s state, flags included (ALLOW_DERIVATIVES is hashed): a
     * repeat. */
    ASSERT_VK(vkCreateGraphicsPipelines(vk.device, VK_NULL_HANDLE, 1, &batch[0], &cb, &own));
    vkDestroyPipeline(vk.device, own, &cb);
    vkDestroyPipelineCache(vk.device, counted_cache, &cb);
    vkDestroyShaderModule(vk.device, module, &cb);
    ASSERT_EQ(atomic_load(&counts.allocs), atomic_load(&counts.frees));
  }

  vkDestroyPipeline(vk.device, reloaded, NULL);
  for (int t = 0; t < 2; t++)
    vkDestroyPipeline(vk.device, ra[t].pipeline, NULL);
  vkDestroyPipeline(vk.device, unknown, NULL);
  for (uint32_t i = 0; i < N_COMPUTE; i++)
    vkDestroyPipeline(vk.device, compute_out[i], NULL);
  for (uint32_t i = 0; i < N_APP; i++)
    vkDestroyPipeline(vk.device, app_out[i], NULL);
  for (uint32_t i = 0; i < N_BATCH; i++)
    vkDestroyPipeline(vk.device, batch_out[i], NULL);
  vkDestroyPipelineCache(vk.device, app_cache2, NULL);
  vkDestroyPipelineCache(vk.device, app_cache, NULL);
  test_objects_destroy(&o);
  test_vk_fini(&vk);
}

/* Distinct hashable pipelines: the batch, the app-cache pair, the compute
 * pair, the raced one. The reload, the second racer and the one made with
 * a counting allocator repeat one each. */
#define DISTINCT (N_BATCH + N_APP + N_COMPUTE + 1)
#define CREATIONS (DISTINCT + 3 + 1)

static void expect_common(const layer_report *r) {
  ASSERT_EQ(r->lines, 1);
  ASSERT_EQ(r->pipelines, CREATIONS);
  ASSERT_EQ(r->hashable, CREATIONS - 1);
  ASSERT_EQ(r->unhashable, 1);
  ASSERT_EQ(r->unhashable_lines, 1);
  ASSERT_EQ(r->passed_through, 0);
  /* The second racer, the reload and the counted one find what this
   * process built. */
  ASSERT_EQ(r->local_hits, 3);
}

/* The app cache the program saves received its two pipelines' entries:
 * at the compile (run 1), or when the program read its cache, fetched in
 * one go for pipelines the device cache served (warm runs). The reloaded
 * cache's pipeline is never read back, so it is never fetched. */
static void expect_app_cache_filled(const layer_report *r) {
  ASSERT_EQ(r->app_cache_entries, N_APP);
}

/* `pcachectl --json layer`, run against env's daemon, shows `runs`
 * reports of this process, the newest with the counters of r (the text
 * report of the same device) and its one unhashable reason. */
static void expect_daemon_report(const test_env *env, const layer_report *r, int runs) {
  char expr[2048];
  snprintf(expr, sizeof expr,
           "(lambda mine: len(mine) == %d and (lambda x: x[\"pipelines\"] == %llu"
           " and x[\"hashable\"] == %llu and x[\"daemon_hits\"] == %llu"
           " and x[\"local_hits\"] == %llu and x[\"compiles\"] == %llu"
           " and x[\"uploaded\"] == %llu and x[\"unhashable\"] == %llu"
           " and x[\"passed_through\"] == %llu and len(x[\"device_key\"]) == 64"
           " and x[\"app\"] != \"\" and x[\"reasons\"] == [{\"reason\": \"%s\","
           " \"stype\": %u, \"stype_name\": None, \"count\": 1}])(mine[0]))"
           "([x for x in d[\"reports\"] if x[\"pid\"] == %ld])",
           runs, r->pipelines, r->hashable, r->daemon_hits, r->local_hits, r->compiles, r->uploaded,
           r->unhashable, r->passed_through, r->unhashable_reason, r->unhashable_stype,
           (long)getpid());
  ctl_json_check(env, 0, "layer", expr);
}

/* A program that exits with its device and instance alive, as many do
 * (leak_device 0), or that destroys its instance but leaks the device
 * (leak_device 1, which the loader answers by unloading the driver): the
 * layer reports and its upload still reaches the daemon, and the program
 * exits cleanly. variant: a pipeline no other run builds. */
static void exit_without_cleanup(int leak_device, uint32_t variant) {
  pid_t pid = fork();
  int status;
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    test_vk vk;
    test_plain_program_pipeline(&vk, variant);
    if (leak_device) {
      /* The layer ends the device's record here. The leaked device's
       * driver threads outlive the unloaded driver, which LeakSanitizer's
       * exit-time scan of thread stacks cannot survive: leave at once. */
      vkDestroyInstance(vk.instance, NULL);
      _exit(0);
    }
    exit(0); /* destructors run, Vulkan objects are left to the OS */
  }
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

int main(void) {
  test_env env;
  layer_report r;
  layer_test_start(&env, "layer");

  /* 1. Fresh daemon: everything compiles and is uploaded, filed under
   * VkApplicationInfo's name. */
  run_program();
  layer_report_read(&r);
  expect_common(&r);
  ASSERT_EQ(strcmp(r.app, "pcache-test"), 0);
  ASSERT_EQ(r.daemon_hits, 0);
  ASSERT_EQ(r.compiles, DISTINCT);
  ASSERT_EQ(r.uploaded, DISTINCT);
  expect_app_cache_filled(&r);
  /* The unknown struct is named: the reason and its sType. */
  ASSERT_EQ(strcmp(r.unhashable_reason, "pnext"), 0);
  ASSERT_EQ(r.unhashable_stype, 1000999000u);
  /* The same report reached the daemon. */
  expect_daemon_report(&env, &r, 1);

  /* 2. Same daemon: every distinct pipeline comes from it. */
  run_program();
  layer_report_read(&r);
  expect_common(&r);
  ASSERT_EQ(r.daemon_hits, DISTINCT);
  ASSERT_EQ(r.compiles, 0);
  expect_app_cache_filled(&r);
  expect_daemon_report(&env, &r, 2);

  /* 2b. Another app name (PCACHE_APP_NAME overrides VkApplicationInfo):
   * still hits, since a Get is by state hash whatever the app. */
  setenv("PCACHE_APP_NAME", "renamed-app", 1);
  run_program();
  layer_report_read(&r);
  expect_common(&r);
  ASSERT_EQ(strcmp(r.app, "renamed-app"), 0);
  ASSERT_EQ(r.daemon_hits, DISTINCT);
  unsetenv("PCACHE_APP_NAME");

  /* 2c. Exit with everything alive: reported and uploaded at exit. */
  exit_without_cleanup(0, 20);
  layer_report_read(&r);
  ASSERT_EQ(r.lines, 1);
  ASSERT_EQ(r.compiles, 1);
  ASSERT_EQ(r.uploaded, 1);
  /* 2d. The instance destroyed, the device leaked: the layer ends the
   * device's record while the driver is still there. */
  exit_without_cleanup(1, 21);
  layer_report_read(&r);
  ASSERT_EQ(r.lines, 1);
  ASSERT_EQ(r.compiles, 1);
  ASSERT_EQ(r.uploaded, 1);

  /* 3. A stalled daemon: bounded waits, everything still builds. */
  setenv("PCACHE_TIMEOUT_MS", "200", 1);
  test_daemon_pause(&env);
  run_program();
  layer_report_read(&r);
  expect_common(&r);
  ASSERT_EQ(r.daemon_hits + r.compiles, DISTINCT);
  kill(env.daemon_pid, SIGCONT);

  /* 4. The daemon killed: no daemon at all. */
  test_daemon_stop(&env, SIGKILL);
  run_program();
  layer_report_read(&r);
  expect_common(&r);
  ASSERT_EQ(r.daemon_hits, 0);
  ASSERT_EQ(r.compiles, DISTINCT);
  expect_app_cache_filled(&r);

  /* 5. Disabled: the loader does not load the layer, so no report. */
  setenv("PCACHE_LAYER_DISABLE", "1", 1);
  run_program();
  layer_report_read(&r);
  ASSERT_EQ(r.lines, 0);

  test_env_cleanup(&env);
  printf("test_layer: ok\n");
  return 0;
}
