/*
 * pcache-demo - build N graphics pipelines through libpcache and say where
 * each one came from.
 *
 * A headless Vulkan program (no window, no swapchain) on whatever device the
 * loader gives first. Run it twice against one pcached: the first run
 * compiles and uploads, the second finds the blobs in the daemon. It prints
 * key=value lines (for scripts) and then a short human summary. With
 * --plain it builds the same pipelines with no pcache code at all, as a
 * program the Vulkan layer serves (docs/layer.md).
 *
 * This file is the part to read first: how a program opens a client and a
 * device context, builds its pipelines through them, looks them up again
 * by its own keys, and what it can learn after. What any Vulkan program
 * needs besides (set-up, objects, the create infos) is beside it, listed
 * in demo.h.
 *
 *   pcache-demo [--pipelines N] [--app-name NAME] [--device INDEX] [--no-daemon]
 *               [--plain [--cache-file FILE] [--threads N] [--shuffle]
 *               [--fresh-caches | --cache-group N] [--fresh-objects] [--destroy-each]
 *               [--alternate] [--read-each]]
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vulkan/vulkan.h>

#include <pcache/pcache.h>

#include "demo.h"
#include "demo_pipelines.h"
#include "demo_plain.h"
#include "demo_vk.h"

/* Tier-1 key: the demo has one global state (one render pass). */
#define DEMO_GLOBAL_KEY UINT64_C(0x70636163686531)

static void usage(FILE *f) {
  fprintf(f,
          "usage: " DEMO_NAME " [--pipelines N] [--app-name NAME] [--device INDEX] "
          "[--no-daemon] [--plain [--cache-file FILE] [--threads N] [--shuffle]\n"
          "        [--fresh-caches | --cache-group N] [--fresh-objects] [--destroy-each]\n"
          "        [--alternate] [--read-each]]\n"
          "  --pipelines N    graphics pipelines to build (default 64, at most %d)\n"
          "  --app-name NAME  name the daemon files entries under (default " DEMO_NAME ")\n"
          "  --device INDEX   physical device to use (default 0, the loader's first)\n"
          "  --no-daemon      never contact pcached (same as PCACHE_DISABLE=1)\n"
          "  --plain          use no pcache code at all: plain vkCreate* calls, as a\n"
          "                   program that never heard of pcache makes them (run it\n"
          "                   with PCACHE_LAYER=1 to see the layer serve it)\n"
          "  --cache-file F   with --plain: load the app's own pipeline cache from F\n"
          "                   if it exists, save it there at exit\n"
          "  --threads N      with --plain: create the pipelines on N threads (default 1)\n"
          "  --shuffle        with --plain: create them in a fixed scrambled order, as\n"
          "                   a replay that walks them by hash does (a benchmark's probe)\n"
          "  --fresh-caches   with --plain: each pipeline into an empty VkPipelineCache of\n"
          "                   its own, its data read back, as pcache-replay and a\n"
          "                   compile through libpcache do (a benchmark's probe)\n"
          "  --cache-group N  with --plain: as --fresh-caches, but each N pipelines of a\n"
          "                   thread into one cache (a probe)\n"
          "  --read-each      with --fresh-caches or --cache-group: read the cache's data\n"
          "                   after each pipeline, not only once its group is full\n"
          "  --fresh-objects  with --plain: each pipeline with a sampler, layouts and\n"
          "                   render pass made for it and destroyed after, as\n"
          "                   pcache-replay makes them from a description (a probe)\n"
          "  --destroy-each   with --plain: destroy each pipeline as soon as it is made,\n"
          "                   as a replayer that keeps none alive would (a probe)\n"
          "  --app-owned      PCACHE_PIPELINES_APP: a new pipeline per call, the demo's to\n"
          "                   destroy (no tier pass)\n"
          "  --alternate      with --plain: the probes above but --shuffle on every other\n"
          "                   pipeline of a thread only, each half's time reported\n"
          "                   apart: what a probe costs, measured within one process\n",
          DEMO_MAX_PIPELINES);
}

static int parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *ret_value) {
  char *end;
  unsigned long v;
  errno = 0;
  v = strtoul(text, &end, 10);
  if (errno || end == text || *end || v < min || v > max)
    return -EINVAL;
  *ret_value = (uint32_t)v;
  return 0;
}

/* Returns 0, 1 for --help, or -EINVAL after printing usage. */
static int parse_args(int argc, char **argv, demo_options *ret_opts) {
  demo_options opts = {.pipelines = 64, .app_name = DEMO_NAME, .threads = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(a, "--no-daemon")) {
      opts.no_daemon = 1;
    } else if (!strcmp(a, "--plain")) {
      opts.plain = 1;
    } else if (!strcmp(a, "--app-owned")) {
      opts.app_owned = 1;
    } else if (!strcmp(a, "--shuffle")) {
      opts.shuffle = 1;
    } else if (!strcmp(a, "--fresh-caches") && !opts.fresh_caches) {
      opts.fresh_caches = 1;
    } else if (!strcmp(a, "--cache-group") && val && !opts.fresh_caches) {
      if (parse_u32(val, 1, DEMO_MAX_PIPELINES, &opts.fresh_caches) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--fresh-objects")) {
      opts.fresh_objects = 1;
    } else if (!strcmp(a, "--destroy-each")) {
      opts.destroy_each = 1;
    } else if (!strcmp(a, "--alternate")) {
      opts.alternate = 1;
    } else if (!strcmp(a, "--read-each")) {
      opts.read_each = 1;
    } else if (!strcmp(a, "--cache-file") && val && *val) {
      opts.cache_file = val;
      i++;
    } else if (!strcmp(a, "--pipelines") && val) {
      if (parse_u32(val, 1, DEMO_MAX_PIPELINES, &opts.pipelines) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--threads") && val) {
      if (parse_u32(val, 1, 64, &opts.threads) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--device") && val) {
      if (parse_u32(val, 0, 64, &opts.device_index) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--app-name") && val && *val) {
      opts.app_name = val;
      i++;
    } else {
      goto out_usage;
    }
  }
  if ((opts.cache_file || opts.threads > 1 || opts.shuffle || opts.fresh_caches ||
       opts.fresh_objects || opts.destroy_each || opts.alternate || opts.read_each) &&
      !opts.plain)
    goto out_usage;
  if (opts.read_each && !opts.fresh_caches)
    goto out_usage;
  if (opts.app_owned && opts.plain)
    goto out_usage;
  *ret_opts = opts;
  return 0;

out_usage:
  usage(stderr);
  return -EINVAL;
}

int main(int argc, char **argv) {
  demo_options opts;
  demo_vk vk = {0};
  demo_objects objs = {0};
  demo_variant *variant = NULL;
  VkPipeline *pipelines = NULL;
  pcache_client *client = NULL;
  pcache_device *pdev = NULL;
  pcache_tier *tier = NULL;
  pcache_stats st;
  pcache_counters counters = {0};
  uint32_t tier_mismatch = 0, tier_missing = 0;
  size_t cache_bytes = 0;
  double t0, create_ms, tier_ms, device_ms, setup_ms;
  int r, flush_r, exit_code = 1;
  VkResult vr;

  r = parse_args(argc, argv, &opts);
  if (r != 0)
    return r > 0 ? 0 : 2;

  variant = malloc(sizeof *variant);
  pipelines = calloc(opts.pipelines, sizeof *pipelines);
  if (!variant || !pipelines) {
    log_err("out of memory");
    goto out_free;
  }

  t0 = now_ms();
  if (demo_vk_init(&opts, &vk) < 0)
    goto out_free;
  if (opts.plain) {
    exit_code = demo_run_plain(&opts, &vk, now_ms() - t0);
    goto out_vk;
  }
  device_ms = now_ms() - t0;

  /* pcache's own start: the connection, the device key, the prefetch. */
  t0 = now_ms();
  pcache_client_options copts = {
      .struct_size = sizeof(pcache_client_options),
      .app_name = opts.app_name,
      .application_name = opts.app_name,
      .disable_daemon = opts.no_daemon,
  };
  r = pcache_client_open(&copts, &client);
  if (r < 0) {
    log_err("pcache_client_open: %s", pcache_strerror(r));
    goto out_vk;
  }

  /* struct_size: without it the library reads the 0.1 layout, which has
   * no instance_api_version, and so never asks a 1.0 instance's device
   * for its UUID and driver names (pcachectl list would show "-"). */
  pcache_device_info dinfo = {
      .struct_size = sizeof dinfo,
      .instance = vk.instance,
      .physical_device = vk.physical_device,
      .device = vk.device,
      .creation_feedback = vk.creation_feedback,
      .instance_api_version = vk.api_version,
      .cache_control = vk.cache_control,
      .pipeline_ownership = opts.app_owned ? PCACHE_PIPELINES_APP : PCACHE_PIPELINES_SHARED,
  };
  r = pcache_device_create(client, &dinfo, &pdev);
  if (r < 0) {
    log_err("pcache_device_create: %s", pcache_strerror(r));
    goto out_client;
  }
  setup_ms = now_ms() - t0;

  vr = demo_objects_create(pdev, &vk, &objs);
  if (vr != VK_SUCCESS) {
    log_err("creating shader modules and layouts: VkResult %d", (int)vr);
    goto out_device;
  }

  /* Pass 1: the full create-info path, as an engine's loading screen does. */
  t0 = now_ms();
  for (uint32_t i = 0; i < opts.pipelines; i++) {
    demo_variant_fill(variant, &objs, i);
    vr = pcache_get_graphics_pipeline(pdev, &variant->info, &pipelines[i]);
    if (vr != VK_SUCCESS) {
      log_err("pcache_get_graphics_pipeline(variant %" PRIu32 "): VkResult %d", i, (int)vr);
      goto out_objects;
    }
  }
  create_ms = now_ms() - t0;
  pcache_device_end_frame(pdev);

  /*
   * Pass 2: a render loop keyed by the app's own integers. The first lookup
   * of each draw key misses the tier and finds the pipeline by its state
   * hash; after end_frame every lookup is one lock-free probe.
   */
  t0 = now_ms();
  if (opts.app_owned)
    goto pass2_done; /* the tiers hand out the context's pipelines */
  r = pcache_device_select_tier(pdev, DEMO_GLOBAL_KEY, &tier);
  if (r < 0) {
    log_err("pcache_device_select_tier: %s", pcache_strerror(r));
    goto out_objects;
  }
  for (uint32_t i = 0; i < opts.pipelines; i++) {
    VkPipeline p = VK_NULL_HANDLE;
    demo_variant_fill(variant, &objs, i);
    vr = pcache_tier_get_graphics_pipeline(tier, i, &variant->info, &p);
    if (vr != VK_SUCCESS) {
      log_err("pcache_tier_get_graphics_pipeline(%" PRIu32 "): VkResult %d", i, (int)vr);
      goto out_objects;
    }
    if (p != pipelines[i])
      tier_mismatch++;
  }
  pcache_device_end_frame(pdev);
  for (uint32_t i = 0; i < opts.pipelines; i++) {
    VkPipeline p = pcache_tier_lookup(tier, i);
    if (p == VK_NULL_HANDLE)
      tier_missing++;
    else if (p != pipelines[i])
      tier_mismatch++;
  }
pass2_done:
  tier_ms = now_ms() - t0;
  pcache_device_end_frame(pdev);

  /* Uploads run in the background; wait for them so the next run finds
   * them (a real app would just exit, or keep running). One flush waits at
   * most the client's timeout; a loaded machine can take longer to commit,
   * so the demo tries for up to five seconds before it gives up. */
  t0 = now_ms();
  do
    flush_r = pcache_device_flush(pdev);
  while (flush_r == -ETIMEDOUT && now_ms() - t0 < 5000.0);

  r = pcache_device_get_stats(pdev, &st);
  if (r == 0)
    r = pcache_device_get_counters(pdev, &counters);
  if (r < 0) {
    log_err("pcache_device_get_stats: %s", pcache_strerror(r));
    goto out_objects;
  }
  if (vkGetPipelineCacheData(vk.device, pcache_device_pipeline_cache(pdev), &cache_bytes, NULL) !=
      VK_SUCCESS)
    cache_bytes = 0;

  /* Machine-readable first (scripts/demo.sh reads these). */
  printf("device=%s\n", vk.props.deviceName);
  printf("device_type=%s\n", demo_is_software_driver(&vk.props) ? "cpu" : "gpu");
  printf("creation_feedback=%d\n", vk.creation_feedback);
  printf("daemon_connected=%d\n", pcache_client_connected(client));
  printf("pipelines=%" PRIu32 "\n", opts.pipelines);
  printf("device_ms=%.3f\n", device_ms);
  printf("setup_ms=%.3f\n", setup_ms);
  printf("create_ms=%.3f\n", create_ms);
  printf("ms_per_pipeline=%.3f\n", create_ms / opts.pipelines);
  printf("tier_pass_ms=%.3f\n", tier_ms);
  printf("daemon_hits=%" PRIu64 "\n", st.daemon_hits);
  printf("driver_cache_hits=%" PRIu64 "\n", st.driver_cache_hits);
  printf("compiles=%" PRIu64 "\n", st.compiles);
  printf("driver_first=%d\n", vk.cache_control);
  printf("driver_hits=%" PRIu64 "\n", counters.driver_hits);
  printf("staged=%" PRIu64 "\n", counters.staged);
  printf("misses=%" PRIu64 "\n", st.misses);
  printf("hits_app_key=%" PRIu64 "\n", st.hits_app_key);
  printf("hits_create_info=%" PRIu64 "\n", st.hits_create_info);
  printf("tier_hits=%" PRIu64 "\n", st.hits_app_key + st.hits_create_info);
  printf("prefetched=%" PRIu64 "\n", st.prefetched);
  printf("rejected_blobs=%" PRIu64 "\n", st.rejected_blobs);
  printf("unhashable=%" PRIu64 "\n", st.unhashable);
  printf("uploaded=%" PRIu64 "\n", st.uploaded);
  printf("upload_queue=%" PRIu64 "\n", st.upload_queue);
  printf("flush=%s\n", flush_r == 0 ? "ok" : pcache_err_name(flush_r));
  printf("cache_data_bytes=%zu\n", cache_bytes);
  printf("tier_mismatches=%" PRIu32 "\n", tier_mismatch + tier_missing);

  printf("\n%s: %" PRIu32 " pipelines on %s, %.3f ms per pipeline\n", DEMO_NAME, opts.pipelines,
         vk.props.deviceName, create_ms / opts.pipelines);
  printf("  daemon: %s, %" PRIu64 " blobs prefetched, %" PRIu64 " daemon hits, %" PRIu64
         " uploaded\n",
         pcache_client_connected(client) ? "connected" : "not connected", st.prefetched,
         st.daemon_hits, st.uploaded);
  printf("  driver: %" PRIu64 " served by its own caches (asked first%s), %" PRIu64
         " built without a blob, %" PRIu64 " cache hits (creation feedback%s)\n",
         counters.driver_hits, vk.cache_control ? "" : ": unavailable", st.compiles,
         st.driver_cache_hits, vk.creation_feedback ? "" : " unavailable");
  printf("  tiers:  %" PRIu64 " hits by app key, %" PRIu64 " by create info\n", st.hits_app_key,
         st.hits_create_info);
  if (demo_is_software_driver(&vk.props) && st.driver_cache_hits == 0)
    printf("  note:   a CPU driver: its pipeline cache holds only a %zu-byte header, it\n"
           "          compiles every pipeline every time and never reports a cache hit,\n"
           "          so \"compiles\" (pipelines pcache had no blob for) is not what the\n"
           "          driver compiled: it compiled all %" PRIu32 ". The flow is real; the\n"
           "          speed-up needs a GPU driver.\n",
           cache_bytes, opts.pipelines);

  if (tier_mismatch || tier_missing) {
    log_err("%" PRIu32 " tier lookups missing, %" PRIu32 " gave another pipeline", tier_missing,
            tier_mismatch);
    goto out_objects;
  }
  exit_code = 0;

out_objects:
  /* The demo's own with --app-owned, as vkCreateGraphicsPipelines' are. */
  for (uint32_t i = 0; opts.app_owned && i < opts.pipelines; i++)
    if (pipelines[i] != VK_NULL_HANDLE)
      vkDestroyPipeline(vk.device, pipelines[i], NULL);
  demo_objects_destroy(pdev, &vk, &objs);
out_device:
  pcache_device_destroy(pdev);
out_client:
  pcache_client_close(client);
out_vk:
  demo_vk_fini(&vk);
out_free:
  free(pipelines);
  free(variant);
  return exit_code;
}
