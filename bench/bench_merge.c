/* bench_merge - how a driver's vkMergePipelineCaches cost depends on how the
 * sources are grouped, measured on real per-pipeline blobs.
 *
 * It builds N pipelines of the bench set, each with its own VkPipelineCache,
 * keeps each cache's data (what libpcache uploads per pipeline), and then,
 * for each group size G, loads every blob into its own source cache (as the
 * client must, so that a bad blob loses only itself) and merges them into a
 * fresh destination G sources per call. For reference it also loads one
 * monolithic blob of all N (what an app that saves its own cache does, and
 * what a pcache snapshot is).
 *
 *   bench_merge [--pipelines N] [--groups 1,8,64,512,0]   (0 = all at once)
 *
 * Prints key=value lines: merge_gG_us_per_blob, load_us_per_blob,
 * merge_us_per_blob, mono_load_ms. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "pipeset.h"

typedef struct blob {
  void *data;
  size_t size;
} blob;

static VkPipelineCache new_cache(const bench_vk *vk, const void *data, size_t size) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                  .initialDataSize = size,
                                  .pInitialData = data};
  VkPipelineCache cache;
  if (vkCreatePipelineCache(vk->device, &ci, NULL, &cache) != VK_SUCCESS)
    bench_die("vkCreatePipelineCache failed");
  return cache;
}

static blob cache_data(const bench_vk *vk, VkPipelineCache cache) {
  blob b = {0};
  if (vkGetPipelineCacheData(vk->device, cache, &b.size, NULL) != VK_SUCCESS)
    bench_die("vkGetPipelineCacheData failed");
  b.data = malloc(b.size ? b.size : 1);
  if (!b.data || vkGetPipelineCacheData(vk->device, cache, &b.size, b.data) != VK_SUCCESS)
    bench_die("vkGetPipelineCacheData failed");
  return b;
}

static void build(const bench_vk *vk, const bench_pipeset *set, uint32_t i, VkPipelineCache cache) {
  VkPipeline p;
  VkResult vr;
  if (bench_pipeset_is_compute(set, i))
    vr = vkCreateComputePipelines(vk->device, cache, 1, bench_pipeset_compute(set, i), NULL, &p);
  else
    vr = vkCreateGraphicsPipelines(vk->device, cache, 1, bench_pipeset_graphics(set, i), NULL, &p);
  if (vr != VK_SUCCESS)
    bench_die("pipeline %u: VkResult %d", i, (int)vr);
  vkDestroyPipeline(vk->device, p, NULL);
}

int main(int argc, char **argv) {
  unsigned groups[16] = {1, 8, 64, 512, 0};
  size_t n_groups = 5;
  uint32_t n = 512;
  static const struct option longopts[] = {
      {"pipelines", required_argument, NULL, 'n'}, {"groups", required_argument, NULL, 'g'}, {0}};
  int c;
  while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
    if (c == 'n')
      n = (uint32_t)strtoul(optarg, NULL, 10);
    else if (c == 'g')
      n_groups = bench_parse_list(optarg, groups, 16);
    else
      bench_die("usage: bench_merge [--pipelines N] [--groups 1,8,64,0]");
  }

  bench_vk vk;
  bench_vk_init(&vk, "bench_merge");
  bench_vk_print(&vk);
  bench_pipeset *set = bench_pipeset_create(&vk, NULL, n);
  blob *blobs = calloc(n, sizeof *blobs);
  VkPipelineCache mono = new_cache(&vk, NULL, 0);
  size_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    VkPipelineCache own = new_cache(&vk, NULL, 0);
    build(&vk, set, i, own);
    blobs[i] = cache_data(&vk, own);
    total += blobs[i].size;
    vkDestroyPipelineCache(vk.device, own, NULL);
    build(&vk, set, i, mono);
  }
  blob mono_blob = cache_data(&vk, mono);
  vkDestroyPipelineCache(vk.device, mono, NULL);
  bench_kv_u64("", "merge_pipelines", n);
  bench_kv_u64("", "merge_blob_bytes_total", total);
  bench_kv_u64("", "merge_mono_bytes", mono_blob.size);

  uint64_t t0 = bench_now_ns();
  VkPipelineCache loaded = new_cache(&vk, mono_blob.data, mono_blob.size);
  bench_kv_f("", "mono_load_ms", (double)(bench_now_ns() - t0) / 1e6);
  vkDestroyPipelineCache(vk.device, loaded, NULL);

  VkPipelineCache *srcs = calloc(n, sizeof *srcs);
  for (size_t g = 0; g < n_groups; g++) {
    uint32_t group = groups[g] ? groups[g] : n;
    char key[64];
    VkPipelineCache dst = new_cache(&vk, NULL, 0);
    uint64_t t_load = bench_now_ns();
    for (uint32_t i = 0; i < n; i++)
      srcs[i] = new_cache(&vk, blobs[i].data, blobs[i].size);
    uint64_t t_merge = bench_now_ns();
    for (uint32_t i = 0; i < n; i += group) {
      uint32_t k = n - i < group ? n - i : group;
      if (vkMergePipelineCaches(vk.device, dst, k, srcs + i) != VK_SUCCESS)
        bench_die("vkMergePipelineCaches failed");
    }
    uint64_t t_end = bench_now_ns();
    snprintf(key, sizeof key, "merge_g%u_load_us_per_blob", group);
    bench_kv_f("", key, (double)(t_merge - t_load) / 1e3 / n);
    snprintf(key, sizeof key, "merge_g%u_merge_us_per_blob", group);
    bench_kv_f("", key, (double)(t_end - t_merge) / 1e3 / n);
    snprintf(key, sizeof key, "merge_g%u_us_per_blob", group);
    bench_kv_f("", key, (double)(t_end - t_load) / 1e3 / n);
    for (uint32_t i = 0; i < n; i++)
      vkDestroyPipelineCache(vk.device, srcs[i], NULL);
    vkDestroyPipelineCache(vk.device, dst, NULL);
  }

  for (uint32_t i = 0; i < n; i++)
    free(blobs[i].data);
  free(blobs);
  free(srcs);
  free(mono_blob.data);
  bench_pipeset_destroy(set);
  bench_vk_fini(&vk);
  return 0;
}
