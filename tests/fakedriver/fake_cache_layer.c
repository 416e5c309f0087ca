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
 * driver was asked. Not for use outside the test suite. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include "common/hash.h"

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

static void log_answer(const char *what) {
  const char *path = getenv("PCACHE_TEST_DRIVER_CACHE_LOG");
  int fd;
  if (!path || !*path || (fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0)
    return;
  char line[16];
  int n = snprintf(line, sizeof line, "%s\n", what);
  if (write(fd, line, (size_t)n) != n) {
    /* a test that cannot count answers fails on the count */
  }
  close(fd);
}

static void *find_link(const void *chain, VkStructureType stype) {
  for (const VkBaseInStructure *s = chain; s; s = s->pNext) {
    const VkLayerInstanceCreateInfo *link = (const VkLayerInstanceCreateInfo *)s;
    if (s->sType == stype && link->function == VK_LAYER_LINK_INFO)
      return (void *)s;
  }
  return NULL;
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

/* One create info through the emulated cache; Info is the create info
 * type, create the next layer's function. */
#define ONE(Info, create, kind, stages, n_stages, graphics)                                        \
  do {                                                                                             \
    Info one = infos[i];                                                                           \
    char key[33];                                                                                  \
    int asked = (one.flags & FAIL_ON) != 0;                                                        \
    VkResult vr;                                                                                   \
    key_of((stages), (n_stages), one.flags & ~(uint32_t)FAIL_ON, (kind), (graphics), key);         \
    ret_pipelines[i] = VK_NULL_HANDLE;                                                             \
    if (asked && !cached(key)) {                                                                   \
      log_answer("miss");                                                                          \
      result = result == VK_SUCCESS ? VK_PIPELINE_COMPILE_REQUIRED : result;                       \
      continue;                                                                                    \
    }                                                                                              \
    one.flags &= ~(VkPipelineCreateFlags)FAIL_ON;                                                  \
    vr = create(device, cache, 1, &one, allocator, &ret_pipelines[i]);                             \
    if (vr != VK_SUCCESS) {                                                                        \
      result = vr;                                                                                 \
      continue;                                                                                    \
    }                                                                                              \
    if (asked)                                                                                     \
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

static VKAPI_ATTR VkResult VKAPI_CALL fake_CreateInstance(const VkInstanceCreateInfo *ci,
                                                          const VkAllocationCallbacks *allocator,
                                                          VkInstance *ret_instance) {
  VkLayerInstanceCreateInfo *link =
      find_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO);
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
  return VK_SUCCESS;
}

static VKAPI_ATTR VkResult VKAPI_CALL fake_CreateDevice(VkPhysicalDevice physical_device,
                                                        const VkDeviceCreateInfo *ci,
                                                        const VkAllocationCallbacks *allocator,
                                                        VkDevice *ret_device) {
  VkLayerDeviceCreateInfo *link = find_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO);
  VkResult vr;
  if (!link || !link->u.pLayerInfo || !g.CreateDevice)
    return VK_ERROR_INITIALIZATION_FAILED;
  g.next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  vr = g.CreateDevice(physical_device, ci, allocator, ret_device);
  if (vr != VK_SUCCESS)
    return vr;
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
