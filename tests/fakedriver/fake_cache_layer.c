/* VK_LAYER_PCACHE_test_driver_cache: a test-only explicit layer that gives
 * lavapipe what pcache's driver-first path needs and lavapipe lacks: a
 * driver-side pipeline cache that answers
 * VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT. Lavapipe
 * answers that flag with VK_PIPELINE_COMPILE_REQUIRED every time; a GPU
 * driver with a warm disk cache creates the pipeline from it. This layer
 * stands for that disk cache: a directory ($PCACHE_TEST_DRIVER_CACHE) with
 * one empty file per pipeline the driver below it has compiled, named by a
 * hash of what decides the compiled code (each stage's SPIR-V, entry point
 * and specialization, and the create flags). A creation with the flag whose
 * file exists is passed down without it (lavapipe then compiles, which a
 * test cannot tell from a cache hit, and counts as one); without a file it
 * returns VK_PIPELINE_COMPILE_REQUIRED and creates nothing. Every
 * successful creation without the flag leaves its file, as a driver fills
 * its disk cache. Without $PCACHE_TEST_DRIVER_CACHE the layer passes
 * everything through. $PCACHE_TEST_DRIVER_CACHE_LOG, when set, gets one
 * line per answer ("hit", "miss", "fill"), so a test can count what the
 * driver was asked.
 *
 * With $PCACHE_TEST_DRIVER_BINARIES=1 as well, the layer also stands for a
 * driver with VK_KHR_pipeline_binary (and VK_KHR_maintenance5, which it
 * needs): both are listed among the device's extensions, their features
 * and the binary properties are reported, and the five entry points
 * answer. A binary's key is the emulated cache key (16 bytes), its data
 * that key in hex behind a marker. A pipeline created with
 * VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR is remembered until its
 * captured data is released; binaries from it or from data carry its key
 * ("binary" in the log for each made from data; data without the marker
 * is refused); the internal-cache query (pPipelineCreateInfo) answers from
 * the emulated cache ("query-hit") or VK_PIPELINE_BINARY_MISSING_KHR
 * ("query-miss"). A creation with VkPipelineBinaryInfoKHR has it, and a
 * VkPipelineCreateFlags2CreateInfoKHR (whose flags then replace the create
 * info's), taken out of the chain, since lavapipe knows neither, and is
 * created normally below ("frombin"). vkGetPipelineKeyKHR's global key is
 * $PCACHE_TEST_DRIVER_GLOBAL_KEY (default "global-1"), so a test can
 * change it as a driver update would. Not for use outside the test
 * suite. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include "client/vkext.h"
#include "common/hash.h"
#include "layer/link.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_OBJECTS 4096

/* The layer's one instance and device at a time: what its tests create. */
static struct {
  pthread_mutex_t lock;
  PFN_vkGetInstanceProcAddr next_gipa;
  PFN_vkGetDeviceProcAddr next_gdpa;
  PFN_vkDestroyInstance DestroyInstance;
  PFN_vkCreateDevice CreateDevice;
  PFN_vkDestroyDevice DestroyDevice;
  PFN_vkCreateShaderModule CreateShaderModule;
  PFN_vkDestroyShaderModule DestroyShaderModule;
  PFN_vkCreateGraphicsPipelines CreateGraphicsPipelines;
  PFN_vkCreateComputePipelines CreateComputePipelines;
  int cache_control; /* the device enabled pipelineCreationCacheControl */
  PFN_vkEnumerateDeviceExtensionProperties EnumerateDeviceExtensionProperties;
  PFN_vkGetPhysicalDeviceFeatures2 GetPhysicalDeviceFeatures2;
  PFN_vkGetPhysicalDeviceProperties2 GetPhysicalDeviceProperties2;
  /* Pipelines created with the capture bit whose data is not released. */
  struct {
    VkPipeline pipeline;
    char key[33];
  } captured[MAX_OBJECTS];
  size_t n_captured;
  struct {
    VkShaderModule module;
    pcache__hash code;
  } modules[MAX_OBJECTS];
  size_t n_modules;
} g = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const char *cache_dir(void) {
  const char *d = getenv("PCACHE_TEST_DRIVER_CACHE");
  return d && *d ? d : NULL;
}

static int binaries_on(void) {
  const char *v = getenv("PCACHE_TEST_DRIVER_BINARIES");
  return cache_dir() && v && v[0] == '1';
}

/* Test knobs for hostile tests: $PCACHE_TEST_DRIVER_<name>, "" when unset. */
static const char *knob(const char *name) {
  char var[128];
  const char *v;
  snprintf(var, sizeof var, "PCACHE_TEST_DRIVER_%s", name);
  v = getenv(var);
  return v ? v : "";
}

static void log_answer(const char *what) {
  const char *path = getenv("PCACHE_TEST_DRIVER_CACHE_LOG");
  int fd;
  if (!path || !*path || (fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
    return;
  char line[32];
  int n = snprintf(line, sizeof line, "%s\n", what);
  if (write(fd, line, (size_t)n) != n) {
    /* a test that cannot count answers fails on the count */
  }
  close(fd);
}

/* The code hash of a module this layer saw made; zero when unknown. */
static pcache__hash module_code(VkShaderModule module) {
  pcache__hash h = {{0}};
  pthread_mutex_lock(&g.lock);
  for (size_t i = 0; i < g.n_modules; i++)
    if (g.modules[i].module == module) {
      h = g.modules[i].code;
      break;
    }
  pthread_mutex_unlock(&g.lock);
  return h;
}

/* The fixed-function state a graphics pipeline's code depends on, in the
 * plain fields of its structs (handles differ between processes). */
#define AFTER_PNEXT(s) ((const uint8_t *)(s) + 2 * sizeof(void *))
#define PLAIN_SIZE(s) (sizeof *(s)-2 * sizeof(void *))
static size_t graphics_state(const VkGraphicsPipelineCreateInfo *ci, uint8_t *buf, size_t cap) {
  size_t len = 0;
#define PUTS(p, size)                                                                              \
  do {                                                                                             \
    size_t s_ = (size);                                                                            \
    if ((p) && len + s_ <= cap) {                                                                  \
      memcpy(buf + len, (p), s_);                                                                  \
      len += s_;                                                                                   \
    }                                                                                              \
  } while (0)
  if (ci->pInputAssemblyState)
    PUTS(&ci->pInputAssemblyState->topology, sizeof(VkPrimitiveTopology));
  if (ci->pRasterizationState)
    PUTS(AFTER_PNEXT(ci->pRasterizationState), PLAIN_SIZE(ci->pRasterizationState));
  if (ci->pMultisampleState)
    PUTS(&ci->pMultisampleState->rasterizationSamples, sizeof(VkSampleCountFlagBits));
  if (ci->pDepthStencilState)
    PUTS(AFTER_PNEXT(ci->pDepthStencilState), PLAIN_SIZE(ci->pDepthStencilState));
  if (ci->pColorBlendState) {
    const VkPipelineColorBlendStateCreateInfo *cb = ci->pColorBlendState;
    PUTS(&cb->logicOpEnable, sizeof cb->logicOpEnable);
    PUTS(cb->pAttachments, cb->attachmentCount * sizeof *cb->pAttachments);
  }
  if (ci->pDynamicState)
    PUTS(ci->pDynamicState->pDynamicStates,
         ci->pDynamicState->dynamicStateCount * sizeof(VkDynamicState));
  if (ci->pVertexInputState) {
    const VkPipelineVertexInputStateCreateInfo *vi = ci->pVertexInputState;
    PUTS(vi->pVertexBindingDescriptions,
         vi->vertexBindingDescriptionCount * sizeof *vi->pVertexBindingDescriptions);
    PUTS(vi->pVertexAttributeDescriptions,
         vi->vertexAttributeDescriptionCount * sizeof *vi->pVertexAttributeDescriptions);
  }
  for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext)
    if (s->sType == VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO) {
      const VkPipelineRenderingCreateInfo *r = (const VkPipelineRenderingCreateInfo *)s;
      PUTS(r->pColorAttachmentFormats, r->colorAttachmentCount * sizeof(VkFormat));
      PUTS(&r->depthAttachmentFormat, sizeof r->depthAttachmentFormat);
    }
#undef PUTS
  return len;
}

/* What decides the code of one pipeline, hashed into a file name. */
static void key_of(const VkPipelineShaderStageCreateInfo *stages, uint32_t n, uint32_t flags,
                   uint32_t kind, const VkGraphicsPipelineCreateInfo *graphics, char out[33]) {
  uint8_t buf[8192];
  size_t len = 0;
  pcache__hash h;
#define PUT(p, size)                                                                               \
  do {                                                                                             \
    size_t s_ = (size);                                                                            \
    if (len + s_ <= sizeof buf) {                                                                  \
      memcpy(buf + len, (p), s_);                                                                  \
      len += s_;                                                                                   \
    }                                                                                              \
  } while (0)
  PUT(&kind, sizeof kind);
  PUT(&flags, sizeof flags);
  for (uint32_t i = 0; i < n; i++) {
    pcache__hash code = module_code(stages[i].module);
    const VkSpecializationInfo *spec = stages[i].pSpecializationInfo;
    PUT(&stages[i].stage, sizeof stages[i].stage);
    PUT(code.bytes, sizeof code.bytes);
    PUT(stages[i].pName, strlen(stages[i].pName) + 1);
    if (spec) {
      PUT(spec->pMapEntries, spec->mapEntryCount * sizeof *spec->pMapEntries);
      PUT(spec->pData, spec->dataSize);
    }
  }
#undef PUT
  if (graphics)
    len += graphics_state(graphics, buf + len, sizeof buf - len);
  pcache__hash128(buf, len, &h);
  pcache__hash_format(&h, out);
}

static int cached(const char *key) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", cache_dir(), key);
  return access(path, F_OK) == 0;
}

static void fill(const char *key) {
  char path[4096];
  int fd;
  snprintf(path, sizeof path, "%s/%s", cache_dir(), key);
  fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd >= 0)
    close(fd);
  log_answer("fill");
}

#define FAIL_ON VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT
#define CAPTURE VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR

/* Takes the structs of types[] (which lavapipe does not know) out of a
 * chain: the struct in front of each is changed until put_back. found[k]
 * is the struct of types[k], or NULL. Returns the chain's new head. */
typedef struct stripped {
  VkBaseOutStructure *before[4];
  const void *was[4];
  size_t n;
} stripped;

static const void *strip(const void *chain, const VkStructureType *types, size_t n_types,
                         const VkBaseInStructure **found, stripped *st) {
  const void *head = chain;
  VkBaseOutStructure *prev = NULL;
  memset(st, 0, sizeof *st);
  for (size_t k = 0; k < n_types; k++)
    found[k] = NULL;
  for (const VkBaseInStructure *s = chain; s; s = s->pNext) {
    size_t k = 0;
    while (k < n_types && s->sType != types[k])
      k++;
    if (k == n_types) {
      prev = (VkBaseOutStructure *)s;
      continue;
    }
    found[k] = s;
    if (!prev) {
      head = s->pNext;
    } else if (st->n < 4) {
      st->before[st->n] = prev;
      st->was[st->n++] = prev->pNext;
      prev->pNext = (VkBaseOutStructure *)s->pNext;
    }
  }
  return head;
}

static void put_back(stripped *st) {
  while (st->n > 0) {
    st->n--;
    st->before[st->n]->pNext = (VkBaseOutStructure *)st->was[st->n];
  }
}

static const VkStructureType pipeline_types[2] = {
    VK_STRUCTURE_TYPE_PIPELINE_CREATE_FLAGS_2_CREATE_INFO_KHR,
    VK_STRUCTURE_TYPE_PIPELINE_BINARY_INFO_KHR};

static void capture_note(VkPipeline pipeline, const char *key) {
  pthread_mutex_lock(&g.lock);
  if (g.n_captured < MAX_OBJECTS) {
    g.captured[g.n_captured].pipeline = pipeline;
    memcpy(g.captured[g.n_captured++].key, key, 33);
  }
  pthread_mutex_unlock(&g.lock);
}

/* One create info through the emulated cache; Info is the create info
 * type, create the next layer's function. */
#define ONE(Info, create, kind, stages, n_stages, graphics)                                        \
  do {                                                                                             \
    Info one = infos[i];                                                                           \
    char key[33];                                                                                  \
    stripped st;                                                                                   \
    VkResult vr;                                                                                   \
    const VkBaseInStructure *found[2];                                                             \
    one.pNext = strip(one.pNext, pipeline_types, 2, found, &st);                                   \
    const VkPipelineCreateFlags2CreateInfoKHR *f2 = (const void *)found[0];                        \
    int from_binary = found[1] && ((const VkPipelineBinaryInfoKHR *)found[1])->binaryCount > 0;    \
    if (f2)                                                                                        \
      one.flags = (VkPipelineCreateFlags)(f2->flags & ~(uint64_t)CAPTURE);                         \
    int asked = (one.flags & FAIL_ON) != 0;                                                        \
    key_of((stages), (n_stages), one.flags & ~(uint32_t)FAIL_ON, (kind), (graphics), key);         \
    ret_pipelines[i] = VK_NULL_HANDLE;                                                             \
    if (asked && !g.cache_control) {                                                               \
      /* Invalid without the feature (VUID-...-pipelineCreationCacheControl-02878):                \
       * a driver may do anything; this one refuses, and says so. */                               \
      put_back(&st);                                                                               \
      log_answer("invalid");                                                                       \
      result = VK_ERROR_VALIDATION_FAILED_EXT;                                                     \
      continue;                                                                                    \
    }                                                                                              \
    if (asked && !from_binary && !cached(key)) {                                                   \
      put_back(&st);                                                                               \
      log_answer("miss");                                                                          \
      result = result == VK_SUCCESS ? VK_PIPELINE_COMPILE_REQUIRED : result;                       \
      continue;                                                                                    \
    }                                                                                              \
    one.flags &= ~(VkPipelineCreateFlags)FAIL_ON;                                                  \
    vr = create(device, from_binary ? VK_NULL_HANDLE : cache, 1, &one, allocator,                  \
                &ret_pipelines[i]);                                                                \
    put_back(&st);                                                                                 \
    if (vr != VK_SUCCESS) {                                                                        \
      result = vr;                                                                                 \
      continue;                                                                                    \
    }                                                                                              \
    if (f2 && (f2->flags & CAPTURE))                                                               \
      capture_note(ret_pipelines[i], key);                                                         \
    if (from_binary)                                                                               \
      log_answer("frombin");                                                                       \
    else if (asked)                                                                                \
      log_answer("hit");                                                                           \
    else if (!cached(key))                                                                         \
      fill(key);                                                                                   \
  } while (0)

static VKAPI_ATTR VkResult VKAPI_CALL
fake_CreateGraphicsPipelines(VkDevice device, VkPipelineCache cache, uint32_t count,
                             const VkGraphicsPipelineCreateInfo *infos,
                             const VkAllocationCallbacks *allocator, VkPipeline *ret_pipelines) {
  VkResult result = VK_SUCCESS;
  if (!cache_dir())
    return g.CreateGraphicsPipelines(device, cache, count, infos, allocator, ret_pipelines);
  for (uint32_t i = 0; i < count; i++)
    ONE(VkGraphicsPipelineCreateInfo, g.CreateGraphicsPipelines, 1, infos[i].pStages,
        infos[i].stageCount, &infos[i]);
  return result;
}

static VKAPI_ATTR VkResult VKAPI_CALL
fake_CreateComputePipelines(VkDevice device, VkPipelineCache cache, uint32_t count,
                            const VkComputePipelineCreateInfo *infos,
                            const VkAllocationCallbacks *allocator, VkPipeline *ret_pipelines) {
  VkResult result = VK_SUCCESS;
  if (!cache_dir())
    return g.CreateComputePipelines(device, cache, count, infos, allocator, ret_pipelines);
  for (uint32_t i = 0; i < count; i++)
    ONE(VkComputePipelineCreateInfo, g.CreateComputePipelines, 2, &infos[i].stage, 1, NULL);
  return result;
}

static VKAPI_ATTR VkResult VKAPI_CALL
fake_CreateShaderModule(VkDevice device, const VkShaderModuleCreateInfo *ci,
                        const VkAllocationCallbacks *allocator, VkShaderModule *ret_module) {
  VkResult vr = g.CreateShaderModule(device, ci, allocator, ret_module);
  if (vr == VK_SUCCESS) {
    pthread_mutex_lock(&g.lock);
    if (g.n_modules < MAX_OBJECTS) {
      g.modules[g.n_modules].module = *ret_module;
      pcache__hash128(ci->pCode, ci->codeSize, &g.modules[g.n_modules].code);
      g.n_modules++;
    }
    pthread_mutex_unlock(&g.lock);
  }
  return vr;
}

static VKAPI_ATTR void VKAPI_CALL fake_DestroyShaderModule(VkDevice device, VkShaderModule module,
                                                           const VkAllocationCallbacks *allocator) {
  pthread_mutex_lock(&g.lock);
  for (size_t i = 0; i < g.n_modules; i++)
    if (g.modules[i].module == module) {
      g.modules[i] = g.modules[--g.n_modules];
      break;
    }
  pthread_mutex_unlock(&g.lock);
  g.DestroyShaderModule(device, module, allocator);
}

/* ------------------------------------------------ VK_KHR_pipeline_binary */

#define MARKER "FAKEBIN1"
#define DATA_SIZE (8 + 32)

typedef struct fake_binary {
  char key[33];
} fake_binary;

static VkPipelineBinaryKHR binary_handle(fake_binary *b) {
  return (VkPipelineBinaryKHR)(uintptr_t)b;
}
static fake_binary *binary_of(VkPipelineBinaryKHR h) { return (fake_binary *)(uintptr_t)h; }

/* The emulated cache key of a VkPipelineCreateInfoKHR's create info. */
static int create_info_key(const VkPipelineCreateInfoKHR *pci, char key[33]) {
  const VkBaseInStructure *ci = pci ? pci->pNext : NULL;
  if (ci && ci->sType == VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO) {
    const VkGraphicsPipelineCreateInfo *gci = (const void *)ci;
    key_of(gci->pStages, gci->stageCount, gci->flags & ~(uint32_t)FAIL_ON, 1, gci, key);
    return 0;
  }
  if (ci && ci->sType == VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO) {
    const VkComputePipelineCreateInfo *cci = (const void *)ci;
    key_of(&cci->stage, 1, cci->flags & ~(uint32_t)FAIL_ON, 2, NULL, key);
    return 0;
  }
  return -EINVAL;
}

/* Nonzero unless the 32 characters at hex are a key in hex. */
static int key_text_bad(const char *hex) {
  char text[33];
  uint8_t bytes[16];
  memcpy(text, hex, 32);
  text[32] = '\0';
  return pcache__unhex(text, bytes, sizeof bytes);
}

static VKAPI_ATTR VkResult VKAPI_CALL fake_CreatePipelineBinariesKHR(
    VkDevice device, const VkPipelineBinaryCreateInfoKHR *ci,
    const VkAllocationCallbacks *allocator, VkPipelineBinaryHandlesInfoKHR *out) {
  char keys[16][33];
  uint32_t n = 0;
  (void)device;
  (void)allocator;
  if (ci->pKeysAndDataInfo) {
    const VkPipelineBinaryKeysAndDataKHR *kd = ci->pKeysAndDataInfo;
    for (uint32_t i = 0; i < kd->binaryCount && n < 16; i++) {
      const VkPipelineBinaryDataKHR *d = &kd->pPipelineBinaryData[i];
      if (d->dataSize != DATA_SIZE || memcmp(d->pData, MARKER, 8) != 0 ||
          key_text_bad((const char *)d->pData + 8) != 0) {
        log_answer("binary-refused");
        return VK_ERROR_INITIALIZATION_FAILED;
      }
      memcpy(keys[n], (const char *)d->pData + 8, 32);
      keys[n++][32] = '\0';
    }
  } else if (ci->pipeline != VK_NULL_HANDLE) {
    const char *capture = knob("CAPTURE");
    if (!strcmp(capture, "fail"))
      return VK_ERROR_INITIALIZATION_FAILED;
    if (!strcmp(capture, "zero")) {
      out->pipelineBinaryCount = 0;
      return VK_SUCCESS;
    }
    if (!strcmp(capture, "many")) { /* more binaries than a container holds */
      if (!out->pPipelineBinaries) {
        out->pipelineBinaryCount = 40;
        return VK_SUCCESS;
      }
      n = out->pipelineBinaryCount;
      for (uint32_t i = 0; i < n; i++) {
        fake_binary *b = calloc(1, sizeof *b);
        memset(b->key, 'a', 32);
        out->pPipelineBinaries[i] = binary_handle(b);
      }
      return VK_SUCCESS;
    }
    pthread_mutex_lock(&g.lock);
    for (size_t i = 0; i < g.n_captured && n == 0; i++)
      if (g.captured[i].pipeline == ci->pipeline)
        memcpy(keys[n++], g.captured[i].key, 33);
    pthread_mutex_unlock(&g.lock);
    if (n == 0)
      return VK_ERROR_INITIALIZATION_FAILED; /* not captured, or released */
  } else {
    if (create_info_key(ci->pPipelineCreateInfo, keys[0]) < 0)
      return VK_ERROR_INITIALIZATION_FAILED;
    if (!cached(keys[0])) {
      log_answer("query-miss");
      return VK_PIPELINE_BINARY_MISSING_KHR;
    }
    if (out->pPipelineBinaries)
      log_answer("query-hit");
    n = 1;
  }
  if (!out->pPipelineBinaries) {
    out->pipelineBinaryCount = n;
    return VK_SUCCESS;
  }
  if (out->pipelineBinaryCount < n)
    return VK_INCOMPLETE;
  for (uint32_t i = 0; i < n; i++) {
    fake_binary *b = calloc(1, sizeof *b);
    if (!b)
      return VK_ERROR_OUT_OF_HOST_MEMORY;
    memcpy(b->key, keys[i], 33);
    out->pPipelineBinaries[i] = binary_handle(b);
    if (ci->pKeysAndDataInfo)
      log_answer("binary");
  }
  out->pipelineBinaryCount = n;
  return VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL fake_DestroyPipelineBinaryKHR(
    VkDevice device, VkPipelineBinaryKHR binary, const VkAllocationCallbacks *allocator) {
  (void)device;
  (void)allocator;
  free(binary_of(binary));
}

static void key_bytes(const char *hex, VkPipelineBinaryKeyKHR *ret_key) {
  ret_key->keySize = 16;
  pcache__unhex(hex, ret_key->key, 16);
}

static VKAPI_ATTR VkResult VKAPI_CALL fake_GetPipelineKeyKHR(VkDevice device,
                                                             const VkPipelineCreateInfoKHR *pci,
                                                             VkPipelineBinaryKeyKHR *ret_key) {
  char key[33];
  (void)device;
  if (!pci) {
    const char *global = getenv("PCACHE_TEST_DRIVER_GLOBAL_KEY");
    const char *mode = knob("GLOBAL_KEY_MODE");
    size_t n;
    if (!strcmp(mode, "fail"))
      return VK_ERROR_INITIALIZATION_FAILED;
    if (!strcmp(mode, "zero")) {
      ret_key->keySize = 0;
      return VK_SUCCESS;
    }
    if (!strcmp(mode, "big")) {
      memset(ret_key->key, 'x', sizeof ret_key->key);
      ret_key->keySize = 0xffffffffu;
      return VK_SUCCESS;
    }
    if (!strcmp(mode, "hang"))
      for (;;)
        pause();
    if (!strcmp(mode, "crash"))
      abort();
    if (!global || !*global)
      global = "global-1";
    n = strlen(global) < 32 ? strlen(global) : 32;
    ret_key->keySize = (uint32_t)n;
    memcpy(ret_key->key, global, n);
    return VK_SUCCESS;
  }
  if (create_info_key(pci, key) < 0)
    return VK_ERROR_INITIALIZATION_FAILED;
  key_bytes(key, ret_key);
  return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL
fake_GetPipelineBinaryDataKHR(VkDevice device, const VkPipelineBinaryDataInfoKHR *info,
                              VkPipelineBinaryKeyKHR *ret_key, size_t *size, void *data) {
  const fake_binary *b = binary_of(info->pipelineBinary);
  (void)device;
  key_bytes(b->key, ret_key);
  if (!data) {
    *size = DATA_SIZE;
    return VK_SUCCESS;
  }
  if (*size < DATA_SIZE) {
    *size = DATA_SIZE;
    return VK_ERROR_NOT_ENOUGH_SPACE_KHR;
  }
  memcpy(data, MARKER, 8);
  memcpy((char *)data + 8, b->key, 32);
  *size = DATA_SIZE;
  return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL fake_ReleaseCapturedPipelineDataKHR(
    VkDevice device, const VkReleaseCapturedPipelineDataInfoKHR *info,
    const VkAllocationCallbacks *allocator) {
  (void)device;
  (void)allocator;
  pthread_mutex_lock(&g.lock);
  for (size_t i = 0; i < g.n_captured; i++)
    if (g.captured[i].pipeline == info->pipeline) {
      g.captured[i] = g.captured[--g.n_captured];
      break;
    }
  pthread_mutex_unlock(&g.lock);
  return VK_SUCCESS;
}

static const char *const binary_extensions[2] = {VK_KHR_MAINTENANCE_5_EXTENSION_NAME,
                                                 VK_KHR_PIPELINE_BINARY_EXTENSION_NAME};

static VKAPI_ATTR VkResult VKAPI_CALL
fake_EnumerateDeviceExtensionProperties(VkPhysicalDevice physical_device, const char *layer,
                                        uint32_t *count, VkExtensionProperties *props) {
  VkExtensionProperties *all;
  uint32_t n = 0, total, copied;
  VkResult vr;
  if (!binaries_on() || layer)
    return g.EnumerateDeviceExtensionProperties(physical_device, layer, count, props);
  vr = g.EnumerateDeviceExtensionProperties(physical_device, NULL, &n, NULL);
  if (vr != VK_SUCCESS || !(all = calloc(n + 2, sizeof *all)))
    return vr != VK_SUCCESS ? vr : VK_ERROR_OUT_OF_HOST_MEMORY;
  vr = g.EnumerateDeviceExtensionProperties(physical_device, NULL, &n, all);
  total = n;
  for (size_t k = 0; k < 2 && vr >= 0; k++) {
    uint32_t i = 0;
    while (i < n && strcmp(all[i].extensionName, binary_extensions[k]))
      i++;
    if (i == n) {
      snprintf(all[total].extensionName, sizeof all[total].extensionName, "%s",
               binary_extensions[k]);
      all[total++].specVersion = 1;
    }
  }
  if (vr < 0) {
    free(all);
    return vr;
  }
  if (!props) {
    *count = total;
    free(all);
    return VK_SUCCESS;
  }
  copied = *count < total ? *count : total;
  memcpy(props, all, copied * sizeof *props);
  *count = copied;
  free(all);
  return copied < total ? VK_INCOMPLETE : VK_SUCCESS;
}

static VKAPI_ATTR void VKAPI_CALL fake_GetPhysicalDeviceFeatures2(
    VkPhysicalDevice physical_device, VkPhysicalDeviceFeatures2 *features) {
  g.GetPhysicalDeviceFeatures2(physical_device, features);
  if (!binaries_on())
    return;
  for (VkBaseOutStructure *s = features->pNext; s; s = s->pNext) {
    if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR)
      ((VkPhysicalDevicePipelineBinaryFeaturesKHR *)s)->pipelineBinaries =
          strcmp(knob("NO_FEATURE"), "1") ? VK_TRUE : VK_FALSE;
    if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR)
      ((VkPhysicalDeviceMaintenance5FeaturesKHR *)s)->maintenance5 = VK_TRUE;
  }
}

static VKAPI_ATTR void VKAPI_CALL fake_GetPhysicalDeviceProperties2(
    VkPhysicalDevice physical_device, VkPhysicalDeviceProperties2 *props) {
  g.GetPhysicalDeviceProperties2(physical_device, props);
  if (!binaries_on())
    return;
  for (VkBaseOutStructure *s = props->pNext; s; s = s->pNext)
    if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_PROPERTIES_KHR) {
      VkPhysicalDevicePipelineBinaryPropertiesKHR *p = (void *)s;
      p->pipelineBinaryInternalCache = VK_TRUE;
      p->pipelineBinaryInternalCacheControl = VK_FALSE;
      p->pipelineBinaryPrefersInternalCache = VK_FALSE;
      p->pipelineBinaryPrecompiledInternalCache = VK_FALSE;
      p->pipelineBinaryCompressedData = VK_FALSE;
    }
}

static VKAPI_ATTR VkResult VKAPI_CALL fake_CreateInstance(const VkInstanceCreateInfo *ci,
                                                          const VkAllocationCallbacks *allocator,
                                                          VkInstance *ret_instance) {
  VkLayerInstanceCreateInfo *link =
      layer_find_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO);
  PFN_vkCreateInstance create;
  VkResult vr;
  if (!link || !link->u.pLayerInfo)
    return VK_ERROR_INITIALIZATION_FAILED;
  g.next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  create = (PFN_vkCreateInstance)g.next_gipa(VK_NULL_HANDLE, "vkCreateInstance");
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  vr = create(ci, allocator, ret_instance);
  if (vr != VK_SUCCESS)
    return vr;
  g.DestroyInstance = (PFN_vkDestroyInstance)g.next_gipa(*ret_instance, "vkDestroyInstance");
  g.CreateDevice = (PFN_vkCreateDevice)g.next_gipa(*ret_instance, "vkCreateDevice");
  g.EnumerateDeviceExtensionProperties = (PFN_vkEnumerateDeviceExtensionProperties)g.next_gipa(
      *ret_instance, "vkEnumerateDeviceExtensionProperties");
  g.GetPhysicalDeviceFeatures2 =
      (PFN_vkGetPhysicalDeviceFeatures2)g.next_gipa(*ret_instance, "vkGetPhysicalDeviceFeatures2");
  g.GetPhysicalDeviceProperties2 = (PFN_vkGetPhysicalDeviceProperties2)g.next_gipa(
      *ret_instance, "vkGetPhysicalDeviceProperties2");
  return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL fake_CreateDevice(VkPhysicalDevice physical_device,
                                                        const VkDeviceCreateInfo *ci,
                                                        const VkAllocationCallbacks *allocator,
                                                        VkDevice *ret_device) {
  VkLayerDeviceCreateInfo *link =
      layer_find_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO);
  static const VkStructureType feature_types[2] = {
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR,
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR};
  const VkBaseInStructure *found[2];
  const char *names[256];
  VkDeviceCreateInfo down = *ci;
  stripped st;
  VkResult vr;
  if (!link || !link->u.pLayerInfo || !g.CreateDevice)
    return VK_ERROR_INITIALIZATION_FAILED;
  g.next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  /* What lavapipe lacks is this layer's: out of the list and the chain. */
  down.pNext = strip(ci->pNext, feature_types, 2, found, &st);
  down.enabledExtensionCount = 0;
  down.ppEnabledExtensionNames = names;
  for (uint32_t i = 0; i < ci->enabledExtensionCount && i < 256; i++)
    if (strcmp(ci->ppEnabledExtensionNames[i], binary_extensions[0]) &&
        strcmp(ci->ppEnabledExtensionNames[i], binary_extensions[1]))
      names[down.enabledExtensionCount++] = ci->ppEnabledExtensionNames[i];
  vr = g.CreateDevice(physical_device, &down, allocator, ret_device);
  put_back(&st);
  if (vr != VK_SUCCESS)
    return vr;
  /* Whether FAIL_ON_PIPELINE_COMPILE_REQUIRED is allowed on this device. */
  g.cache_control = 0;
  for (const VkBaseInStructure *c = ci->pNext; c; c = c->pNext)
    if ((c->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES &&
         ((const VkPhysicalDeviceVulkan13Features *)c)->pipelineCreationCacheControl) ||
        (c->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES &&
         ((const VkPhysicalDevicePipelineCreationCacheControlFeatures *)c)
             ->pipelineCreationCacheControl))
      g.cache_control = 1;
#define NEXT(name) g.name = (PFN_vk##name)g.next_gdpa(*ret_device, "vk" #name)
  NEXT(DestroyDevice);
  NEXT(CreateShaderModule);
  NEXT(DestroyShaderModule);
  NEXT(CreateGraphicsPipelines);
  NEXT(CreateComputePipelines);
#undef NEXT
  return VK_SUCCESS;
}

static PFN_vkVoidFunction device_function(const char *name) {
  if (binaries_on()) {
    if (!strcmp(name, "vkCreatePipelineBinariesKHR"))
      return (PFN_vkVoidFunction)fake_CreatePipelineBinariesKHR;
    if (!strcmp(name, "vkDestroyPipelineBinaryKHR"))
      return (PFN_vkVoidFunction)fake_DestroyPipelineBinaryKHR;
    if (!strcmp(name, "vkGetPipelineKeyKHR"))
      return (PFN_vkVoidFunction)fake_GetPipelineKeyKHR;
    if (!strcmp(name, "vkGetPipelineBinaryDataKHR"))
      return (PFN_vkVoidFunction)fake_GetPipelineBinaryDataKHR;
    if (!strcmp(name, "vkReleaseCapturedPipelineDataKHR"))
      return (PFN_vkVoidFunction)fake_ReleaseCapturedPipelineDataKHR;
  }
  if (!strcmp(name, "vkCreateGraphicsPipelines"))
    return (PFN_vkVoidFunction)fake_CreateGraphicsPipelines;
  if (!strcmp(name, "vkCreateComputePipelines"))
    return (PFN_vkVoidFunction)fake_CreateComputePipelines;
  if (!strcmp(name, "vkCreateShaderModule"))
    return (PFN_vkVoidFunction)fake_CreateShaderModule;
  if (!strcmp(name, "vkDestroyShaderModule"))
    return (PFN_vkVoidFunction)fake_DestroyShaderModule;
  return NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL fake_GetDeviceProcAddr(VkDevice device,
                                                                       const char *name) {
  PFN_vkVoidFunction f = device_function(name);
  if (f)
    return f;
  return g.next_gdpa ? g.next_gdpa(device, name) : NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL fake_GetInstanceProcAddr(VkInstance instance,
                                                                         const char *name) {
  PFN_vkVoidFunction f;
  if (!strcmp(name, "vkCreateInstance"))
    return (PFN_vkVoidFunction)fake_CreateInstance;
  if (!strcmp(name, "vkCreateDevice"))
    return (PFN_vkVoidFunction)fake_CreateDevice;
  if (!strcmp(name, "vkGetInstanceProcAddr"))
    return (PFN_vkVoidFunction)fake_GetInstanceProcAddr;
  if (!strcmp(name, "vkGetDeviceProcAddr"))
    return (PFN_vkVoidFunction)fake_GetDeviceProcAddr;
  if (!strcmp(name, "vkEnumerateDeviceExtensionProperties"))
    return (PFN_vkVoidFunction)fake_EnumerateDeviceExtensionProperties;
  if (!strcmp(name, "vkGetPhysicalDeviceFeatures2") ||
      !strcmp(name, "vkGetPhysicalDeviceFeatures2KHR"))
    return (PFN_vkVoidFunction)fake_GetPhysicalDeviceFeatures2;
  if (!strcmp(name, "vkGetPhysicalDeviceProperties2") ||
      !strcmp(name, "vkGetPhysicalDeviceProperties2KHR"))
    return (PFN_vkVoidFunction)fake_GetPhysicalDeviceProperties2;
  if ((f = device_function(name)) != NULL)
    return f;
  return g.next_gipa ? g.next_gipa(instance, name) : NULL;
}

EXPORT VKAPI_ATTR VkResult VKAPI_CALL
vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *v) {
  if (v->loaderLayerInterfaceVersion < 2)
    return VK_ERROR_INITIALIZATION_FAILED;
  v->loaderLayerInterfaceVersion = 2;
  v->pfnGetInstanceProcAddr = fake_GetInstanceProcAddr;
  v->pfnGetDeviceProcAddr = fake_GetDeviceProcAddr;
  v->pfnGetPhysicalDeviceProcAddr = NULL;
  return VK_SUCCESS;
}
