/* pcache-demo --plain: the demo's pipelines built as a program that never
 * heard of pcache builds them, on threads, with the probes the benchmarks
 * use (see demo_plain.h and the usage). Its own file: it shares the
 * pipelines and the set-up with the pcache path, and nothing else. */
#include "demo_plain.h"

#include <inttypes.h>
#include <pthread.h>
#include <string.h>
#include <sys/resource.h>

#include "demo_pipelines.h"

/* --plain: the app's own cache file, read if it exists. */
static VkPipelineCache plain_cache_load(const demo_vk *vk, const char *path, size_t *ret_bytes) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache cache = VK_NULL_HANDLE;
  void *data = NULL;
  long size = 0;
  FILE *f = fopen(path, "rb");
  *ret_bytes = 0;
  if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (data = malloc((size_t)size)) != NULL && fread(data, 1, (size_t)size, f) == (size_t)size) {
    ci.initialDataSize = (size_t)size;
    ci.pInitialData = data;
    *ret_bytes = (size_t)size;
  }
  if (f)
    fclose(f);
  /* The driver checks the header and ignores data it cannot use. */
  if (vkCreatePipelineCache(vk->device, &ci, NULL, &cache) != VK_SUCCESS)
    cache = VK_NULL_HANDLE;
  free(data);
  return cache;
}

static void plain_cache_save(const demo_vk *vk, VkPipelineCache cache, const char *path) {
  size_t size = 0;
  void *data;
  FILE *f;
  if (vkGetPipelineCacheData(vk->device, cache, &size, NULL) != VK_SUCCESS || !size ||
      !(data = malloc(size)))
    return;
  if (vkGetPipelineCacheData(vk->device, cache, &size, data) == VK_SUCCESS &&
      (f = fopen(path, "wb")) != NULL) {
    if (fwrite(data, 1, size, f) != size)
      log_err("writing %s failed", path);
    fclose(f);
  }
  free(data);
}

/* One --plain thread: pipelines first, first + step, ... */
typedef struct plain_slice {
  const demo_vk *vk;
  const demo_objects *objs;
  VkPipelineCache cache;
  VkPipeline *pipelines;
  const uint32_t *order; /* the variant at each position */
  uint32_t fresh_caches; /* pipelines into each fresh cache; 0: none */
  int fresh_objects;
  int destroy_each;
  int alternate;
  int read_each; /* a fresh cache's data read after each pipeline */
  uint32_t first, step, count;
  uint32_t hits;
  size_t fresh_bytes;       /* the fresh caches' data, summed */
  uint32_t fresh_made;      /* fresh caches made */
  uint32_t fresh_pipelines; /* pipelines built into them */
  double half_ms[2];        /* --alternate: time of the unprobed [0] and probed [1] */
  uint32_t half_n[2];
  VkResult result;
  pthread_t thread;
} plain_slice;

/* Reads a fresh cache's data back, as a replayer does. */
static void fresh_cache_read(plain_slice *s, VkPipelineCache cache) {
  size_t size = 0;
  void *data = NULL;
  if (s->result == VK_SUCCESS &&
      vkGetPipelineCacheData(s->vk->device, cache, &size, NULL) == VK_SUCCESS &&
      (data = malloc(size ? size : 1)) != NULL &&
      vkGetPipelineCacheData(s->vk->device, cache, &size, data) == VK_SUCCESS)
    s->fresh_bytes += size;
  free(data);
}

static void *plain_slice_main(void *arg) {
  plain_slice *s = arg;
  demo_variant *variant = malloc(sizeof *variant);
  s->result = variant ? VK_SUCCESS : VK_ERROR_OUT_OF_HOST_MEMORY;
  /* The fresh cache of the probed pipelines, apart from s->cache: with
   * --alternate the others in between must not go into it. */
  VkPipelineCache fresh = VK_NULL_HANDLE;
  uint32_t in_cache = 0; /* pipelines in the fresh cache so far */
  for (uint32_t pos = s->first; variant && pos < s->count; pos += s->step) {
    uint32_t i = s->order[pos];
    /* --alternate: the probes on the odd pipelines of this thread only. */
    int probed = !s->alternate || ((pos - s->first) / s->step) % 2;
    double t0 = now_ms();
    VkPipelineCreationFeedback fb = {0};
    VkPipelineCreationFeedbackCreateInfo fci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pPipelineCreationFeedback = &fb};
    /* The probes this pipeline gets. */
    int own_objects = s->fresh_objects && probed, into_fresh = s->fresh_caches && probed;
    demo_objects own = {0};
    demo_variant_fill(variant, s->objs, i);
    if (own_objects) {
      /* The shader modules stay shared, as pcache-replay's pool keeps
       * them; the rest is made for this pipeline alone. */
      if ((s->result = demo_objects_create(NULL, s->vk, &own)) != VK_SUCCESS) {
        log_err("the objects of variant %" PRIu32 ": VkResult %d", i, (int)s->result);
        break;
      }
      variant->info.layout = own.pipeline_layout;
      variant->info.renderPass = own.render_pass;
    }
    if (s->vk->creation_feedback)
      variant->info.pNext = &fci;
    if (into_fresh && !in_cache) {
      VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
      if ((s->result = vkCreatePipelineCache(s->vk->device, &pci, NULL, &fresh)) != VK_SUCCESS) {
        log_err("vkCreatePipelineCache: VkResult %d", (int)s->result);
        if (own_objects)
          demo_objects_destroy(NULL, s->vk, &own);
        break;
      }
      s->fresh_made++;
    }
    VkPipelineCache use = into_fresh ? fresh : s->cache;
    s->result =
        vkCreateGraphicsPipelines(s->vk->device, use, 1, &variant->info, NULL, &s->pipelines[i]);
    /* Counted by the handle used, so that a test sees one gone astray. */
    s->fresh_pipelines += s->result == VK_SUCCESS && use != s->cache;
    /* A fresh cache is read back once its group is full (and after each
     * pipeline with --read-each); on a failure it is destroyed unread.
     * A group the thread leaves part full is read after the loop. */
    if (into_fresh) {
      int full = ++in_cache == s->fresh_caches || s->result != VK_SUCCESS;
      if (full || s->read_each)
        fresh_cache_read(s, fresh);
      if (full) {
        vkDestroyPipelineCache(s->vk->device, fresh, NULL);
        fresh = VK_NULL_HANDLE;
        in_cache = 0;
      }
    }
    if (own_objects)
      demo_objects_destroy(NULL, s->vk, &own);
    if (s->result == VK_SUCCESS && s->destroy_each && probed) {
      vkDestroyPipeline(s->vk->device, s->pipelines[i], NULL);
      s->pipelines[i] = VK_NULL_HANDLE;
    }
    s->half_ms[probed] += now_ms() - t0;
    s->half_n[probed]++;
    if (s->result != VK_SUCCESS) {
      log_err("vkCreateGraphicsPipelines(variant %" PRIu32 "): VkResult %d", i, (int)s->result);
      break;
    }
    s->hits += (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
               (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
  }
  if (in_cache) {
    /* The probed half's cost too. */
    double t0 = now_ms();
    if (!s->read_each)
      fresh_cache_read(s, fresh);
    vkDestroyPipelineCache(s->vk->device, fresh, NULL);
    s->half_ms[1] += now_ms() - t0;
  }
  free(variant);
  return NULL;
}

int demo_run_plain(const demo_options *opts, const demo_vk *vk, double device_ms) {
  demo_objects objs = {0};
  VkPipeline *pipelines = calloc(opts->pipelines, sizeof *pipelines);
  plain_slice *slices = calloc(opts->threads, sizeof *slices);
  uint32_t *order = calloc(opts->pipelines, sizeof *order);
  VkPipelineCache cache = VK_NULL_HANDLE;
  size_t loaded_bytes = 0, saved_bytes = 0, fresh_bytes = 0;
  uint32_t fresh_made = 0, fresh_pipelines = 0;
  double half_ms[2] = {0, 0};
  uint32_t half_n[2] = {0, 0};
  uint32_t hits = 0, started = 0;
  double t0 = now_ms(), load_ms, create_ms, save_ms = 0;
  int exit_code = 1, failed = 0;

  if (opts->cache_file)
    cache = plain_cache_load(vk, opts->cache_file, &loaded_bytes);
  load_ms = now_ms() - t0;
  if (!slices || !pipelines || !order || demo_objects_create(NULL, vk, &objs) != VK_SUCCESS) {
    log_err("out of memory, or the driver refused the demo's objects");
    goto out;
  }
  for (uint32_t i = 0; i < opts->pipelines; i++)
    order[i] = i;
  if (opts->shuffle) {
    /* Fisher-Yates with a fixed LCG: the same order every run. */
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (uint32_t i = opts->pipelines - 1; i > 0; i--) {
      uint32_t j, t;
      x = x * 6364136223846793005u + 1442695040888963407u;
      j = (uint32_t)((x >> 33) % (i + 1));
      t = order[i], order[i] = order[j], order[j] = t;
    }
  }
  t0 = now_ms();
  for (; started < opts->threads; started++) {
    slices[started] = (plain_slice){.vk = vk,
                                    .objs = &objs,
                                    .cache = cache,
                                    .pipelines = pipelines,
                                    .order = order,
                                    .fresh_caches = opts->fresh_caches,
                                    .fresh_objects = opts->fresh_objects,
                                    .destroy_each = opts->destroy_each,
                                    .alternate = opts->alternate,
                                    .read_each = opts->read_each,
                                    .first = started,
                                    .step = opts->threads,
                                    .count = opts->pipelines};
    if (pthread_create(&slices[started].thread, NULL, plain_slice_main, &slices[started]) != 0) {
      log_err("cannot start a thread");
      failed = 1;
      break;
    }
  }
  for (uint32_t k = 0; k < started; k++) {
    pthread_join(slices[k].thread, NULL);
    failed |= slices[k].result != VK_SUCCESS;
    hits += slices[k].hits;
    fresh_bytes += slices[k].fresh_bytes;
    fresh_made += slices[k].fresh_made;
    fresh_pipelines += slices[k].fresh_pipelines;
    for (int h = 0; h < 2; h++) {
      half_ms[h] += slices[k].half_ms[h];
      half_n[h] += slices[k].half_n[h];
    }
  }
  if (failed)
    goto out;
  create_ms = now_ms() - t0;
  if (cache != VK_NULL_HANDLE) {
    double s0 = now_ms();
    plain_cache_save(vk, cache, opts->cache_file);
    save_ms = now_ms() - s0;
    (void)vkGetPipelineCacheData(vk->device, cache, &saved_bytes, NULL);
  }

  printf("mode=plain\n");
  printf("device=%s\n", vk->props.deviceName);
  printf("device_type=%s\n", demo_is_software_driver(&vk->props) ? "cpu" : "gpu");
  printf("creation_feedback=%d\n", vk->creation_feedback);
  printf("pipelines=%" PRIu32 "\n", opts->pipelines);
  printf("device_ms=%.3f\n", device_ms);
  printf("cache_load_ms=%.3f\n", load_ms);
  printf("cache_loaded_bytes=%zu\n", loaded_bytes);
  printf("create_ms=%.3f\n", create_ms);
  printf("threads=%" PRIu32 "\n", opts->threads);
  printf("shuffled=%d\n", opts->shuffle);
  printf("fresh_caches=%" PRIu32 "\n", opts->fresh_caches);
  printf("fresh_caches_made=%" PRIu32 "\n", fresh_made);
  printf("fresh_cache_pipelines=%" PRIu32 "\n", fresh_pipelines);
  printf("fresh_cache_bytes=%zu\n", fresh_bytes);
  printf("fresh_objects=%d\n", opts->fresh_objects);
  printf("destroy_each=%d\n", opts->destroy_each);
  {
    /* The process's faults and switches so far, to set beside
     * pcache-replay's closing line. */
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
      printf("minor_faults=%ld\nvoluntary_switches=%ld\ninvoluntary_switches=%ld\n", ru.ru_minflt,
             ru.ru_nvcsw, ru.ru_nivcsw);
  }
  if (opts->alternate) {
    /* Per pipeline, each half: what the probes cost within this process. */
    printf("alternate_unprobed_ms_per_pipeline=%.4f\n", half_n[0] ? half_ms[0] / half_n[0] : 0);
    printf("alternate_probed_ms_per_pipeline=%.4f\n", half_n[1] ? half_ms[1] / half_n[1] : 0);
  }
  printf("ms_per_pipeline=%.4f\n", create_ms / opts->pipelines);
  printf("startup_ms=%.3f\n", device_ms + load_ms + create_ms);
  printf("driver_cache_hits=%" PRIu32 "\n", hits);
  printf("cache_data_bytes=%zu\n", saved_bytes);
  printf("cache_save_ms=%.3f\n", save_ms);
  printf("\n%s --plain: %" PRIu32 " pipelines on %s, %.3f ms per pipeline, %" PRIu32
         " driver cache hits\n",
         DEMO_NAME, opts->pipelines, vk->props.deviceName, create_ms / opts->pipelines, hits);
  exit_code = 0;
out:
  /* Slots of pipelines never made are VK_NULL_HANDLE (calloc). */
  for (uint32_t i = 0; pipelines && i < opts->pipelines; i++)
    vkDestroyPipeline(vk->device, pipelines[i], NULL);
  demo_objects_destroy(NULL, vk, &objs);
  if (cache != VK_NULL_HANDLE)
    vkDestroyPipelineCache(vk->device, cache, NULL);
  free(pipelines);
  free(slices);
  free(order);
  return exit_code;
}
