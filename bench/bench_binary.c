/* bench_binary - what each way of getting a pipeline costs the program's
 * thread, measured inside one process so that the swing between
 * processes does not enter: pipelines of bench/pipeset.c take turns
 * between the modes of a phase (pipeline i gets mode i % modes), each mode
 * timed on its own pipelines.
 *
 *   bench_binary --phase cold|warm|frombin|emptied [--pipelines N] [--dir D]
 *
 * Phases (run in this order, one process each, the driver's disk cache at
 * whatever the caller set up):
 *   cold     plain (no cache) | capture (CAPTURE_DATA, binaries read back,
 *            kept in D) | fresh (an empty VkPipelineCache of its own, its
 *            data read back: libpcache's compile before driver-first)
 *   warm     plain | probe (FAIL_ON_PIPELINE_COMPILE_REQUIRED, no cache) |
 *            probe+capture | query (the internal-cache query, then a
 *            creation from what it gave)
 *   frombin  plain | from binaries read from D before the clock starts
 *   emptied  probe (its miss, then the plain compile) | from binaries |
 *            plain
 * Prints key=value lines: <phase>_<mode>_ms (mean per pipeline),
 * <phase>_<mode>_hits, and the device's binary properties. Needs Vulkan
 * 1.3 with pipelineCreationCacheControl; the binary modes need
 * VK_KHR_pipeline_binary (reported as binaries=0 and skipped without). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "bench_util.h"
#include "client/vkext.h"
#include "pipeset.h"

typedef struct probe {
  bench_vk vk;
  int binaries; /* VK_KHR_pipeline_binary enabled */
  PFN_vkCreatePipelineBinariesKHR CreatePipelineBinaries;
  PFN_vkDestroyPipelineBinaryKHR DestroyPipelineBinary;
  PFN_vkGetPipelineBinaryDataKHR GetPipelineBinaryData;
  PFN_vkReleaseCapturedPipelineDataKHR ReleaseCapturedPipelineData;
  PFN_vkGetPipelineKeyKHR GetPipelineKey;
  const char *dir;
} probe;

static int has_ext(const VkExtensionProperties *e, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(e[i].extensionName, name))
      return 1;
  return 0;
}

/* The instance and a device with cache control and, where there, binaries. */
static void probe_init(probe *p) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "bench_binary",
                           .apiVersion = VK_API_VERSION_1_3};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkPhysicalDevice devs[16];
  uint32_t ndev = 16, next = 0;
  VkExtensionProperties *exts;
  const char *names[4];
  uint32_t nnames = 0;
  bench_vk *vk = &p->vk;

  if (vkCreateInstance(&ici, NULL, &vk->instance) != VK_SUCCESS ||
      vkEnumeratePhysicalDevices(vk->instance, &ndev, devs) < 0 || ndev == 0)
    bench_die("no Vulkan instance or device");
  vk->physical_device = devs[0];
  vkGetPhysicalDeviceProperties(vk->physical_device, &vk->props);
  vk->api_version = vk->props.apiVersion;
  if (vk->api_version < VK_API_VERSION_1_3)
    bench_die("needs Vulkan 1.3");
  VkPhysicalDevicePipelineBinaryPropertiesKHR bprops = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_PROPERTIES_KHR};
  vk->driver.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES;
  VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                    .pNext = &vk->driver};
  if (vkEnumerateDeviceExtensionProperties(vk->physical_device, NULL, &next, NULL) != VK_SUCCESS)
    bench_die("no device extensions");
  exts = calloc(next ? next : 1, sizeof *exts);
  vkEnumerateDeviceExtensionProperties(vk->physical_device, NULL, &next, exts);
  p->binaries = has_ext(exts, next, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME) &&
                has_ext(exts, next, VK_KHR_MAINTENANCE_5_EXTENSION_NAME) &&
                !getenv("BENCH_NO_BINARIES");
  if (p->binaries)
    vk->driver.pNext = &bprops;
  vkGetPhysicalDeviceProperties2(vk->physical_device, &p2);
  vk->driver.pNext = NULL;
  free(exts);

  VkPhysicalDeviceVulkan13Features f13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &f13};
  vkGetPhysicalDeviceFeatures2(vk->physical_device, &f2);
  if (!f13.pipelineCreationCacheControl)
    bench_die("no pipelineCreationCacheControl");
  vk->dynamic_rendering = f13.dynamicRendering == VK_TRUE;
  vk->creation_feedback = 1;
  VkPhysicalDevicePipelineBinaryFeaturesKHR fbin = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR,
      .pipelineBinaries = VK_TRUE};
  VkPhysicalDeviceMaintenance5FeaturesKHR fm5 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR,
      .pNext = &fbin,
      .maintenance5 = VK_TRUE};
  VkPhysicalDeviceVulkan13Features want13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
      .pNext = p->binaries ? &fm5 : NULL,
      .dynamicRendering = f13.dynamicRendering,
      .pipelineCreationCacheControl = VK_TRUE};
  if (p->binaries) {
    names[nnames++] = VK_KHR_MAINTENANCE_5_EXTENSION_NAME;
    names[nnames++] = VK_KHR_PIPELINE_BINARY_EXTENSION_NAME;
  }
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueCount = 1,
                                 .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &want13,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci,
                            .enabledExtensionCount = nnames,
                            .ppEnabledExtensionNames = names};
  if (vkCreateDevice(vk->physical_device, &dci, NULL, &vk->device) != VK_SUCCESS)
    bench_die("vkCreateDevice failed");
  bench_kv_u64(NULL, "binaries", (uint64_t)p->binaries);
  if (!p->binaries)
    return;
  bench_kv_u64(NULL, "binary_internal_cache", bprops.pipelineBinaryInternalCache);
  bench_kv_u64(NULL, "binary_internal_cache_control", bprops.pipelineBinaryInternalCacheControl);
  bench_kv_u64(NULL, "binary_prefers_internal_cache", bprops.pipelineBinaryPrefersInternalCache);
  bench_kv_u64(NULL, "binary_compressed", bprops.pipelineBinaryCompressedData);
#define GET(name) p->name = (PFN_vk##name##KHR)vkGetDeviceProcAddr(vk->device, "vk" #name "KHR")
  GET(CreatePipelineBinaries);
  GET(DestroyPipelineBinary);
  GET(GetPipelineBinaryData);
  GET(ReleaseCapturedPipelineData);
  GET(GetPipelineKey);
#undef GET
  if (!p->CreatePipelineBinaries || !p->GetPipelineBinaryData || !p->DestroyPipelineBinary)
    bench_die("VK_KHR_pipeline_binary enabled but its functions are missing");
}

/* The pNext chain and flags of a create info with the binaries bin in
 * front (when given) and, for a capture, flags 2 in front of those, in
 * b and f2 (the caller's storage). */
static const void *chain_for(const void *next, VkPipelineCreateFlags *flags, uint64_t flags2,
                             const VkPipelineBinaryInfoKHR *bin, VkPipelineBinaryInfoKHR *b,
                             VkPipelineCreateFlags2CreateInfoKHR *f2) {
  if (bin) {
    *b = *bin;
    b->pNext = next;
    next = b;
  }
  f2->pNext = next;
  f2->flags = *flags | flags2;
  *flags |= (VkPipelineCreateFlags)(flags2 & 0x7fffffffu);
  return (flags2 & VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR) ? (const void *)f2 : next;
}

/* Creates pipeline i of set with extra flags (flags2 when capture) and
 * optional binaries; returns the VkResult. */
static VkResult create(probe *p, const bench_pipeset *set, uint32_t i, VkPipelineCache cache,
                       uint64_t flags2, const VkPipelineBinaryInfoKHR *bin, VkPipeline *ret) {
  VkPipelineCreateFlags2CreateInfoKHR f2 = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR};
  VkPipelineBinaryInfoKHR b;
  *ret = VK_NULL_HANDLE;
  if (bench_pipeset_is_compute(set, i)) {
    VkComputePipelineCreateInfo ci = *bench_pipeset_compute(set, i);
    ci.pNext = chain_for(ci.pNext, &ci.flags, flags2, bin, &b, &f2);
    return vkCreateComputePipelines(p->vk.device, cache, 1, &ci, NULL, ret);
  }
  VkGraphicsPipelineCreateInfo ci = *bench_pipeset_graphics(set, i);
  ci.pNext = chain_for(ci.pNext, &ci.flags, flags2, bin, &b, &f2);
  return vkCreateGraphicsPipelines(p->vk.device, cache, 1, &ci, NULL, ret);
}

/* The binaries of a pipeline (captured) or of a create info (query), read
 * back into one file D/i: u32 count, then per binary u32 key size, 32 key
 * bytes, u64 data size, data. Returns bytes written, or 0. */
static size_t save_binaries(probe *p, const VkPipelineBinaryCreateInfoKHR *bci, uint32_t i,
                            int keep) {
  VkPipelineBinaryKHR handles[16];
  VkPipelineBinaryHandlesInfoKHR hi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_HANDLES_INFO_KHR};
  size_t total = 0;
  FILE *f = NULL;
  char path[4096];
  if (p->CreatePipelineBinaries(p->vk.device, bci, NULL, &hi) != VK_SUCCESS ||
      hi.pipelineBinaryCount == 0 || hi.pipelineBinaryCount > 16)
    return 0;
  hi.pPipelineBinaries = handles;
  if (p->CreatePipelineBinaries(p->vk.device, bci, NULL, &hi) != VK_SUCCESS)
    return 0;
  if (keep) {
    snprintf(path, sizeof path, "%s/%u", p->dir, i);
    f = fopen(path, "wb");
  }
  uint32_t count = hi.pipelineBinaryCount;
  if (f)
    fwrite(&count, 4, 1, f);
  for (uint32_t k = 0; k < count; k++) {
    VkPipelineBinaryDataInfoKHR di = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_DATA_INFO_KHR,
                                      .pipelineBinary = handles[k]};
    VkPipelineBinaryKeyKHR key = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR};
    size_t size = 0;
    void *data;
    if (p->GetPipelineBinaryData(p->vk.device, &di, &key, &size, NULL) == VK_SUCCESS &&
        (data = malloc(size ? size : 1)) != NULL) {
      if (p->GetPipelineBinaryData(p->vk.device, &di, &key, &size, data) == VK_SUCCESS) {
        total += size;
        if (f) {
          uint64_t s64 = size;
          fwrite(&key.keySize, 4, 1, f);
          fwrite(key.key, 32, 1, f);
          fwrite(&s64, 8, 1, f);
          fwrite(data, 1, size, f);
        }
      }
      free(data);
    }
    p->DestroyPipelineBinary(p->vk.device, handles[k], NULL);
  }
  if (f)
    fclose(f);
  return total;
}

/* Binaries of pipeline i loaded from D/i into handles (before timing). */
typedef struct loaded {
  uint32_t count;
  VkPipelineBinaryKeyKHR keys[16];
  VkPipelineBinaryDataKHR data[16];
} loaded;

static int load_file(probe *p, uint32_t i, loaded *l) {
  char path[4096];
  FILE *f;
  memset(l, 0, sizeof *l);
  snprintf(path, sizeof path, "%s/%u", p->dir, i);
  if (!(f = fopen(path, "rb")))
    return -ENOENT;
  if (fread(&l->count, 4, 1, f) != 1 || l->count == 0 || l->count > 16) {
    fclose(f);
    return -EINVAL;
  }
  for (uint32_t k = 0; k < l->count; k++) {
    uint64_t s64;
    l->keys[k].sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR;
    if (fread(&l->keys[k].keySize, 4, 1, f) != 1 || fread(l->keys[k].key, 32, 1, f) != 1 ||
        fread(&s64, 8, 1, f) != 1 || s64 > (64u << 20))
      break;
    l->data[k].dataSize = s64;
    l->data[k].pData = malloc(s64 ? s64 : 1);
    if (fread(l->data[k].pData, 1, s64, f) != s64)
      break;
  }
  fclose(f);
  return 0;
}

static void loaded_free(loaded *l) {
  for (uint32_t k = 0; k < l->count; k++)
    free(l->data[k].pData);
}

/* Creates pipeline i from loaded binaries: binaries from data, then the
 * pipeline. Returns the VkResult. */
static VkResult create_from(probe *p, const bench_pipeset *set, uint32_t i, const loaded *l,
                            VkPipeline *ret) {
  VkPipelineBinaryKeysAndDataKHR kd = {
      .binaryCount = l->count, .pPipelineBinaryKeys = l->keys, .pPipelineBinaryData = l->data};
  VkPipelineBinaryCreateInfoKHR bci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR,
                                       .pKeysAndDataInfo = &kd};
  VkPipelineBinaryKHR handles[16];
  VkPipelineBinaryHandlesInfoKHR hi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_HANDLES_INFO_KHR,
                                       .pipelineBinaryCount = l->count,
                                       .pPipelineBinaries = handles};
  VkResult vr = p->CreatePipelineBinaries(p->vk.device, &bci, NULL, &hi);
  if (vr != VK_SUCCESS)
    return vr;
  VkPipelineBinaryInfoKHR bi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_INFO_KHR,
                                .binaryCount = hi.pipelineBinaryCount,
                                .pPipelineBinaries = handles};
  vr = create(p, set, i, VK_NULL_HANDLE, 0, &bi, ret);
  for (uint32_t k = 0; k < hi.pipelineBinaryCount; k++)
    p->DestroyPipelineBinary(p->vk.device, handles[k], NULL);
  return vr;
}

enum { MAXM = 4 };
typedef struct tally {
  const char *name[MAXM];
  double ms[MAXM];
  uint64_t n[MAXM], hits[MAXM], bytes[MAXM];
  double extra_ms[MAXM]; /* a probe's miss, apart from the compile after it */
} tally;

#define FAIL_ON ((uint64_t)VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT)
#define CAPTURE VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR

static void run_one(probe *p, const bench_pipeset *set, const char *phase, uint32_t i, uint32_t m,
                    tally *t, VkPipeline *ret) {
  VkPipeline pl = VK_NULL_HANDLE;
  VkResult vr = VK_SUCCESS;
  uint64_t t0 = bench_now_ns(), t1;
  loaded l;
  int have_loaded = 0;
  if ((!strcmp(phase, "frombin") && m == 1) || (!strcmp(phase, "emptied") && m == 1)) {
    have_loaded = p->binaries && load_file(p, i, &l) == 0;
    t0 = bench_now_ns();
  }
  if (!strcmp(phase, "cold")) {
    if (m == 0) {
      vr = create(p, set, i, VK_NULL_HANDLE, 0, NULL, &pl);
    } else if (m == 1) {
      vr = create(p, set, i, VK_NULL_HANDLE, p->binaries ? CAPTURE : 0, NULL, &pl);
      if (vr == VK_SUCCESS && p->binaries) {
        VkPipelineBinaryCreateInfoKHR bci = {
            .sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR, .pipeline = pl};
        t->bytes[m] += save_binaries(p, &bci, i, 1);
        VkReleaseCapturedPipelineDataInfoKHR ri = {
            .sType = VK_STRUCTURE_TYPE_RELEASE_CAPTURED_PIPELINE_DATA_INFO_KHR, .pipeline = pl};
        p->ReleaseCapturedPipelineData(p->vk.device, &ri, NULL);
      }
    } else {
      VkPipelineCacheCreateInfo cci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
      VkPipelineCache c;
      size_t size = 0;
      vkCreatePipelineCache(p->vk.device, &cci, NULL, &c);
      vr = create(p, set, i, c, 0, NULL, &pl);
      vkGetPipelineCacheData(p->vk.device, c, &size, NULL);
      void *d = malloc(size ? size : 1);
      vkGetPipelineCacheData(p->vk.device, c, &size, d);
      t->bytes[m] += size;
      free(d);
      vkDestroyPipelineCache(p->vk.device, c, NULL);
    }
  } else if (!strcmp(phase, "warm")) {
    if (m == 0) {
      vr = create(p, set, i, VK_NULL_HANDLE, 0, NULL, &pl);
    } else if (m == 1 || m == 2) {
      vr = create(p, set, i, VK_NULL_HANDLE, FAIL_ON | (m == 2 && p->binaries ? CAPTURE : 0), NULL,
                  &pl);
      if (vr == VK_SUCCESS) {
        t->hits[m]++;
        if (m == 2 && p->binaries) {
          VkPipelineBinaryCreateInfoKHR bci = {
              .sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR, .pipeline = pl};
          size_t got = save_binaries(p, &bci, i, 0);
          t->bytes[m] += got;
          VkReleaseCapturedPipelineDataInfoKHR ri = {
              .sType = VK_STRUCTURE_TYPE_RELEASE_CAPTURED_PIPELINE_DATA_INFO_KHR, .pipeline = pl};
          p->ReleaseCapturedPipelineData(p->vk.device, &ri, NULL);
        }
      } else if (vr == VK_PIPELINE_COMPILE_REQUIRED) {
        t->extra_ms[m] += (double)(bench_now_ns() - t0) / 1e6;
        vr = create(p, set, i, VK_NULL_HANDLE, 0, NULL, &pl);
      }
    } else if (p->binaries) {
      /* The internal-cache query: a VkPipelineCreateInfoKHR whose pNext is
       * the pipeline's create info. */
      VkPipelineCreateInfoKHR pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CREATE_INFO_KHR};
      pci.pNext = bench_pipeset_is_compute(set, i) ? (void *)bench_pipeset_compute(set, i)
                                                   : (void *)bench_pipeset_graphics(set, i);
      VkPipelineBinaryCreateInfoKHR bci = {
          .sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR, .pPipelineCreateInfo = &pci};
      size_t got = save_binaries(p, &bci, i, 1);
      t->bytes[m] += got;
      if (got) {
        t->hits[m]++;
        t->extra_ms[m] += (double)(bench_now_ns() - t0) / 1e6;
        if (load_file(p, i, &l) == 0) {
          vr = create_from(p, set, i, &l, &pl);
          loaded_free(&l);
        }
      } else {
        vr = create(p, set, i, VK_NULL_HANDLE, 0, NULL, &pl);
      }
    }
  } else if (!strcmp(phase, "frombin") || !strcmp(phase, "emptied")) {
    if (m == 1 && have_loaded) {
      vr = create_from(p, set, i, &l, &pl);
      if (vr == VK_SUCCESS)
        t->hits[m]++;
      else
        vr = create(p, set, i, VK_NULL_HANDLE, 0, NULL, &pl);
    } else if (m == 0 && !strcmp(phase, "emptied")) {
      vr = create(p, set, i, VK_NULL_HANDLE, FAIL_ON, NULL, &pl);
      if (vr == VK_SUCCESS) {
        t->hits[m]++;
      } else if (vr == VK_PIPELINE_COMPILE_REQUIRED) {
        t->extra_ms[m] += (double)(bench_now_ns() - t0) / 1e6;
        vr = create(p, set, i, VK_NULL_HANDLE, 0, NULL, &pl);
      }
    } else {
      vr = create(p, set, i, VK_NULL_HANDLE, 0, NULL, &pl);
    }
  }
  t1 = bench_now_ns();
  if (have_loaded)
    loaded_free(&l);
  if (vr != VK_SUCCESS)
    bench_die("%s mode %u pipeline %u: VkResult %d", phase, m, i, (int)vr);
  t->ms[m] += (double)(t1 - t0) / 1e6;
  t->n[m]++;
  *ret = pl;
}

int main(int argc, char **argv) {
  const char *phase = NULL;
  uint32_t n = 256, modes;
  probe p = {.dir = "."};
  tally t = {0};
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--phase") && i + 1 < argc)
      phase = argv[++i];
    else if (!strcmp(argv[i], "--pipelines") && i + 1 < argc)
      n = (uint32_t)strtoul(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--dir") && i + 1 < argc)
      p.dir = argv[++i];
    else
      bench_die("usage: bench_binary --phase cold|warm|frombin|emptied [--pipelines N] "
                "[--dir D]");
  }
  if (!phase)
    bench_die("--phase is required");
  if (!strcmp(phase, "cold")) {
    modes = 3;
    t.name[0] = "plain", t.name[1] = "capture", t.name[2] = "fresh";
  } else if (!strcmp(phase, "warm")) {
    modes = 4;
    t.name[0] = "plain", t.name[1] = "probe", t.name[2] = "probecapture", t.name[3] = "query";
  } else if (!strcmp(phase, "frombin")) {
    modes = 2;
    t.name[0] = "plain", t.name[1] = "binary";
  } else if (!strcmp(phase, "emptied")) {
    modes = 3;
    t.name[0] = "probe", t.name[1] = "binary", t.name[2] = "plain";
  } else {
    bench_die("unknown phase '%s'", phase);
  }
  mkdir(p.dir, 0700);
  probe_init(&p);
  bench_vk_print(&p.vk);
  bench_pipeset *set = bench_pipeset_create(&p.vk, NULL, n);
  VkPipeline *pipes = calloc(n, sizeof *pipes);
  for (uint32_t i = 0; i < n; i++)
    run_one(&p, set, phase, i, i % modes, &t, &pipes[i]);
  for (uint32_t m = 0; m < modes; m++) {
    char key[128];
    snprintf(key, sizeof key, "%s_%s_", phase, t.name[m]);
    bench_kv_f(key, "ms", t.n[m] ? t.ms[m] / (double)t.n[m] : 0);
    bench_kv_u64(key, "n", t.n[m]);
    bench_kv_u64(key, "hits", t.hits[m]);
    bench_kv_u64(key, "bytes", t.bytes[m]);
    bench_kv_f(key, "miss_ms", t.n[m] ? t.extra_ms[m] / (double)t.n[m] : 0);
  }
  for (uint32_t i = 0; i < n; i++)
    vkDestroyPipeline(p.vk.device, pipes[i], NULL);
  free(pipes);
  bench_pipeset_destroy(set);
  bench_vk_fini(&p.vk);
  return 0;
}
