/* bench_warm - the cost of building a pipeline set at start-up, one mode
 * and one phase per process (bench/run-warm.sh runs the fresh processes):
 *
 *   a  no cache at all (the script disables the driver's disk cache)
 *   b  the driver's own shader disk cache (the script points it at a
 *      private directory; fill once, measure in a new process)
 *   c  the app alone: one VkPipelineCache saved to a file by the fill run,
 *      loaded into one cache by the measure run
 *   d  libpcache with pcached, prefetch at pcache_device_create
 *   e  libpcache with pcached, fetching per miss (PCACHE_NO_PREFETCH=1)
 *
 * --app-owned: modes d and e with PCACHE_PIPELINES_APP (a pipeline per
 * call, no tiers), destroyed by the bench as in modes a-c.
 *
 * The timed span starts before the cache is loaded (reading the file, or
 * pcache_device_create's prefetch and merge) and ends when the last
 * pipeline exists, so every mode pays for its own cache. Object creation
 * (modules, layouts, render passes) is inside the span in every mode.
 * Driver cache hits come from VkPipelineCreationFeedback. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_util.h"
#include "pipeset.h"

typedef struct options {
  char mode;
  int fill;
  uint32_t n;
  const char *cache_file;
  const char *app;
  int probe;
  int app_owned; /* modes d, e: PCACHE_PIPELINES_APP */
} options;

static VkPipeline create_plain(const bench_vk *vk, const bench_pipeset *set, uint32_t i,
                               VkPipelineCache cache, int *hit) {
  VkPipelineCreationFeedback fb = {0}, stage_fb[2] = {{0}};
  VkPipelineCreationFeedbackCreateInfo fci = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
      .pPipelineCreationFeedback = &fb,
      .pipelineStageCreationFeedbackCount = 0,
      .pPipelineStageCreationFeedbacks = stage_fb};
  VkPipeline pipe = VK_NULL_HANDLE;
  VkResult vr;

  if (bench_pipeset_is_compute(set, i)) {
    VkComputePipelineCreateInfo ci = *bench_pipeset_compute(set, i);
    if (vk->creation_feedback) {
      fci.pNext = ci.pNext;
      fci.pipelineStageCreationFeedbackCount = 1;
      ci.pNext = &fci;
    }
    vr = vkCreateComputePipelines(vk->device, cache, 1, &ci, NULL, &pipe);
  } else {
    VkGraphicsPipelineCreateInfo ci = *bench_pipeset_graphics(set, i);
    if (vk->creation_feedback) {
      fci.pNext = ci.pNext;
      fci.pipelineStageCreationFeedbackCount = ci.stageCount;
      ci.pNext = &fci;
    }
    vr = vkCreateGraphicsPipelines(vk->device, cache, 1, &ci, NULL, &pipe);
  }
  if (vr != VK_SUCCESS)
    bench_die("pipeline %u (%s): VkResult %d", i, bench_pipeset_name(set, i), (int)vr);
  *hit = (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
         (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
  return pipe;
}

static void *read_file(const char *path, size_t *ret_size) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  void *data;
  if (!f || fstat(fileno(f), &st) < 0)
    bench_die("%s: %s", path, strerror(errno));
  data = malloc(st.st_size ? (size_t)st.st_size : 1);
  if (!data || fread(data, 1, (size_t)st.st_size, f) != (size_t)st.st_size)
    bench_die("read %s: %s", path, strerror(errno));
  fclose(f);
  *ret_size = (size_t)st.st_size;
  return data;
}

static void write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0)
    bench_die("write %s: %s", path, strerror(errno));
}

static void usage(void) {
  fprintf(stderr, "usage: bench_warm --mode a|b|c|d|e --phase fill|measure --n N\n"
                  "                  [--cache-file PATH] [--app NAME] [--app-owned]\n"
                  "       bench_warm --probe\n");
  exit(2);
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"mode", required_argument, NULL, 'm'}, {"phase", required_argument, NULL, 'p'},
      {"n", required_argument, NULL, 'n'},    {"cache-file", required_argument, NULL, 'c'},
      {"app", required_argument, NULL, 'a'},  {"probe", no_argument, NULL, 'P'},
      {"app-owned", no_argument, NULL, 'O'},  {NULL, 0, NULL, 0}};
  options opt = {.n = 256, .app = "pcache-bench-warm"};
  const char *phase = "measure";
  bench_vk vk;
  VkPipelineCache cache = VK_NULL_HANDLE;
  pcache_client *client = NULL;
  pcache_device *pdev = NULL;
  VkPipeline *pipes;
  bench_pipeset *set;
  uint64_t t_device, t0, t_setup, t_objects, t1, hits = 0;
  size_t cache_bytes = 0;
  int c, use_pcache;

  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    switch (c) {
    case 'm': opt.mode = optarg[0]; break;
    case 'p': phase = optarg; break;
    case 'n': opt.n = (uint32_t)strtoul(optarg, NULL, 10); break;
    case 'c': opt.cache_file = optarg; break;
    case 'a': opt.app = optarg; break;
    case 'P': opt.probe = 1; break;
    case 'O':
      opt.app_owned = 1;
      break;
    default: usage();
    }
  }
  t_device = bench_now_ns();
  bench_vk_init(&vk, opt.app);
  t_device = bench_now_ns() - t_device;
  if (opt.probe) {
    bench_vk_print(&vk);
    bench_kv_u64(NULL, "dynamic_rendering", (uint64_t)vk.dynamic_rendering);
    bench_kv_u64(NULL, "creation_feedback", (uint64_t)vk.creation_feedback);
    bench_vk_fini(&vk);
    return 0;
  }
  if (!strchr("abcde", opt.mode) || !opt.mode || opt.n == 0)
    usage();
  if (strcmp(phase, "fill") == 0)
    opt.fill = 1;
  else if (strcmp(phase, "measure") != 0)
    usage();
  if (opt.mode == 'c' && !opt.cache_file)
    bench_die("mode c needs --cache-file");
  use_pcache = opt.mode == 'd' || opt.mode == 'e';
  pipes = calloc(opt.n, sizeof *pipes);
  if (!pipes)
    bench_die("out of memory");

  t0 = bench_now_ns();
  if (opt.mode == 'c') {
    void *data = NULL;
    VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
    VkResult vr;
    if (!opt.fill) {
      data = read_file(opt.cache_file, &cache_bytes);
      pci.initialDataSize = cache_bytes;
      pci.pInitialData = data;
    }
    vr = vkCreatePipelineCache(vk.device, &pci, NULL, &cache);
    free(data);
    if (vr != VK_SUCCESS)
      bench_die("vkCreatePipelineCache: %d", (int)vr);
  } else if (use_pcache) {
    pcache_client_options copt = {.app_name = opt.app,
                                  .application_name = opt.app,
                                  /* The fill run must not give up on uploads; the
                                   * measure run keeps the default an app gets. */
                                  .timeout_ms = opt.fill ? 10000 : 0};
    pcache_device_info info = {.struct_size = sizeof info,
                               .instance = vk.instance,
                               .physical_device = vk.physical_device,
                               .device = vk.device,
                               .creation_feedback = vk.creation_feedback,
                               .instance_api_version = VK_API_VERSION_1_3, /* pipeset.c asks 1.3 */
                               .cache_control = vk.cache_control,
                               .pipeline_ownership =
                                   opt.app_owned ? PCACHE_PIPELINES_APP : PCACHE_PIPELINES_SHARED};
    int r = pcache_client_open(&copt, &client);
    if (r < 0)
      bench_die("pcache_client_open: %s", pcache_strerror(r));
    r = pcache_device_create(client, &info, &pdev);
    if (r < 0)
      bench_die("pcache_device_create: %s", pcache_strerror(r));
  }
  t_setup = bench_now_ns();

  set = bench_pipeset_create(&vk, pdev, opt.n);
  t_objects = bench_now_ns();
  for (uint32_t i = 0; i < opt.n; i++) {
    if (use_pcache) {
      VkResult vr = bench_pipeset_is_compute(set, i)
                        ? pcache_get_compute_pipeline(pdev, bench_pipeset_compute(set, i), &pipes[i])
                        : pcache_get_graphics_pipeline(pdev, bench_pipeset_graphics(set, i),
                                                       &pipes[i]);
      if (vr != VK_SUCCESS)
        bench_die("pipeline %u (%s): VkResult %d", i, bench_pipeset_name(set, i), (int)vr);
    } else {
      int hit = 0;
      pipes[i] = create_plain(&vk, set, i, cache, &hit);
      hits += (uint64_t)hit;
    }
  }
  t1 = bench_now_ns();

  bench_kv_str(NULL, "mode", (char[]){opt.mode, 0});
  bench_kv_str(NULL, "phase", phase);
  bench_kv_u64(NULL, "n", opt.n);
  bench_kv_str(NULL, "device_name", vk.props.deviceName);
  bench_kv_f(NULL, "total_ms", (double)(t1 - t0) / 1e6);
  bench_kv_f(NULL, "setup_ms", (double)(t_setup - t0) / 1e6);
  /* Shader modules, layouts and render passes (through libpcache in modes
   * d and e): inside total_ms too. */
  bench_kv_f(NULL, "objects_ms", (double)(t_objects - t_setup) / 1e6);
  bench_kv_f(NULL, "pipelines_ms", (double)(t1 - t_objects) / 1e6);
  /* Instance and device creation: outside total_ms, which the modes above
   * compare; the Vulkan layer seeds its cache inside vkCreateDevice, so
   * its start-up is device_ms + total_ms (bench/run-layer.sh). */
  bench_kv_f(NULL, "device_ms", (double)t_device / 1e6);
  bench_kv_f(NULL, "startup_ms", (double)(t_device + t1 - t0) / 1e6);
  bench_kv_f(NULL, "ms_per_pipeline", (double)(t1 - t0) / 1e6 / opt.n);
  if (use_pcache) {
    pcache_stats st;
    if (pcache_device_get_stats(pdev, &st) == 0) {
      hits = st.driver_cache_hits;
      bench_kv_u64(NULL, "prefetched", st.prefetched);
      bench_kv_u64(NULL, "snapshot_loaded", st.snapshot_loaded);
      bench_kv_u64(NULL, "daemon_hits", st.daemon_hits);
      pcache_counters counters = {0};
      (void)pcache_device_get_counters(pdev, &counters);
      bench_kv_u64(NULL, "compiles", st.compiles);
      bench_kv_u64(NULL, "driver_first_hits", counters.driver_hits);
      bench_kv_u64(NULL, "staged", counters.staged);
      bench_kv_u64(NULL, "misses", st.misses);
      bench_kv_u64(NULL, "unhashable", st.unhashable);
      bench_kv_u64(NULL, "rejected_blobs", st.rejected_blobs);
    }
    bench_kv_u64(NULL, "daemon_connected", (uint64_t)pcache_client_connected(client));
    bench_kv_u64(NULL, "no_prefetch_env",
                 getenv("PCACHE_NO_PREFETCH") && strcmp(getenv("PCACHE_NO_PREFETCH"), "1") == 0);
  }
  bench_kv_u64(NULL, "feedback", (uint64_t)vk.creation_feedback);
  bench_kv_u64(NULL, "driver_hits", hits);
  bench_kv_f(NULL, "hit_rate", (double)hits / opt.n);

  if (opt.mode == 'c' && opt.fill) {
    size_t size = 0;
    void *data;
    if (vkGetPipelineCacheData(vk.device, cache, &size, NULL) != VK_SUCCESS)
      bench_die("vkGetPipelineCacheData failed");
    data = malloc(size ? size : 1);
    if (!data || vkGetPipelineCacheData(vk.device, cache, &size, data) != VK_SUCCESS)
      bench_die("vkGetPipelineCacheData failed");
    write_file(opt.cache_file, data, size);
    free(data);
    cache_bytes = size;
  }
  if (opt.mode == 'c')
    bench_kv_u64(NULL, "cache_bytes", cache_bytes);
  if (use_pcache && opt.fill) {
    /* Every upload must be committed before the measure run starts. */
    uint64_t deadline = bench_now_ns() + 120ull * 1000000000ull;
    pcache_stats st = {0};
    int r;
    while ((r = pcache_device_flush(pdev)) == -ETIMEDOUT && bench_now_ns() < deadline)
      ;
    pcache_device_get_stats(pdev, &st);
    bench_kv_u64(NULL, "uploaded", st.uploaded);
    bench_kv_u64(NULL, "upload_queue", st.upload_queue);
    if (r < 0)
      bench_die("pcache_device_flush: %s", pcache_strerror(r));
  }

  if (!use_pcache || opt.app_owned)
    for (uint32_t i = 0; i < opt.n; i++)
      vkDestroyPipeline(vk.device, pipes[i], NULL);
  bench_pipeset_destroy(set);
  pcache_device_destroy(pdev);
  pcache_client_close(client);
  if (cache)
    vkDestroyPipelineCache(vk.device, cache, NULL);
  bench_vk_fini(&vk);
  free(pipes);
  return 0;
}
