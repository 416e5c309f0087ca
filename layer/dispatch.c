/* The loader interface (version 2: vkNegotiateLoaderLayerInterfaceVersion
 * is the only exported symbol, so nothing here can collide with an app's
 * globals named like Vulkan functions), instance and device creation, and
 * the table of what the layer intercepts: object and pipeline creation
 * only, never anything called per draw. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/record.h"
#include "client/upload.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/parse.h"
#include "layer/layer.h"
#include "layer/link.h"

static pcache_client *open_client(const VkInstanceCreateInfo *ci) {
  pcache_client_options options = PCACHE_STRUCT_INIT(pcache_client_options);
  pcache_client *client = NULL;
  /* $PCACHE_APP_NAME overrides this in pcache_client_open, as for any app. */
  if (ci->pApplicationInfo)
    options.app_name = ci->pApplicationInfo->pApplicationName;
  /* Out of memory: the app runs without the daemon. A layer the user
   * turned on says when it cannot reach the daemon (client.h). */
  (void)pcache__client_open_flags(&options, PCACHE__CLIENT_SAY_INACTIVE, &client);
  return client;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateInstance(const VkInstanceCreateInfo *ci,
                                                           const VkAllocationCallbacks *allocator,
                                                           VkInstance *ret_instance) {
  VkLayerInstanceCreateInfo *link =
      layer_find_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO);
  PFN_vkGetInstanceProcAddr next_gipa;
  PFN_vkCreateInstance create;
  layer_instance *li;
  VkResult vr;
  if (!link || !link->u.pLayerInfo)
    return VK_ERROR_INITIALIZATION_FAILED;
  next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  create = (PFN_vkCreateInstance)next_gipa(VK_NULL_HANDLE, "vkCreateInstance");
  if (!create)
    return VK_ERROR_INITIALIZATION_FAILED;
  /* The record first: once the instance exists, the layer must be able to
   * answer for it. */
  li = pcache__calloc(1, sizeof *li);
  if (!li)
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  /* The next layer finds its own link in the same chain. */
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  vr = create(ci, allocator, ret_instance);
  if (vr != VK_SUCCESS) {
    pcache__free(li);
    return vr;
  }
  li->key = layer_key(*ret_instance);
  li->instance = *ret_instance;
  li->next_gipa = next_gipa;
  li->DestroyInstance = (PFN_vkDestroyInstance)next_gipa(*ret_instance, "vkDestroyInstance");
  li->CreateDevice = (PFN_vkCreateDevice)next_gipa(*ret_instance, "vkCreateDevice");
  li->api_version = ci->pApplicationInfo && ci->pApplicationInfo->apiVersion
                        ? ci->pApplicationInfo->apiVersion
                        : VK_API_VERSION_1_0;
  if (!li->DestroyInstance || !li->CreateDevice || layer_registry_add_instance(li) < 0) {
    if (li->DestroyInstance)
      li->DestroyInstance(*ret_instance, allocator);
    pcache__free(li);
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
  {
    uint64_t t0 = pcache__mono_ns();
    li->client = open_client(ci);
    li->open_us = (pcache__mono_ns() - t0) / 1000;
  }
  return VK_SUCCESS;
}

static void device_end(layer_device *ld);

static VKAPI_ATTR void VKAPI_CALL layer_DestroyInstance(VkInstance instance,
                                                        const VkAllocationCallbacks *allocator) {
  layer_instance *li;
  layer_device *orphan;
  if (instance == VK_NULL_HANDLE)
    return;
  li = layer_registry_remove_instance(layer_key(instance));
  if (!li)
    return;
  /* Devices the program leaked: the loader is about to free their dispatch
   * (a later device may get the same key) and unload the driver, so their
   * records end now, while the driver can still destroy the core's cache.
   * The VkDevice itself stays the program's. */
  while ((orphan = layer_registry_remove_device_of(li)) != NULL) {
    device_end(orphan);
    layer_stats_fini(&orphan->stats);
    pcache__free(orphan);
  }
  li->DestroyInstance(instance, allocator);
  pcache_client_close(li->client);
  pcache__free(li);
}

static void resolve_device(layer_device *ld) {
#define NEXT(name) ld->name = (PFN_vk##name)ld->next_gdpa(ld->device, "vk" #name)
  NEXT(DestroyDevice);
  NEXT(CreateShaderModule);
  NEXT(DestroyShaderModule);
  NEXT(CreateSampler);
  NEXT(DestroySampler);
  NEXT(CreateDescriptorSetLayout);
  NEXT(DestroyDescriptorSetLayout);
  NEXT(CreatePipelineLayout);
  NEXT(DestroyPipelineLayout);
  NEXT(CreateRenderPass);
  NEXT(CreateRenderPass2);
  NEXT(DestroyRenderPass);
  NEXT(CreatePipelineCache);
  NEXT(DestroyPipelineCache);
  NEXT(GetPipelineCacheData);
  NEXT(MergePipelineCaches);
  NEXT(CreateGraphicsPipelines);
  NEXT(CreateComputePipelines);
  NEXT(DestroyPipeline);
#undef NEXT
  ld->CreateRenderPass2KHR =
      (PFN_vkCreateRenderPass2)ld->next_gdpa(ld->device, "vkCreateRenderPass2KHR");
}

static void report_all_at_exit(void);

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateDevice(VkPhysicalDevice physical_device,
                                                         const VkDeviceCreateInfo *ci,
                                                         const VkAllocationCallbacks *allocator,
                                                         VkDevice *ret_device) {
  VkLayerDeviceCreateInfo *link =
      layer_find_link(ci->pNext, VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO);
  layer_instance *li = layer_registry_instance(layer_key(physical_device));
  PFN_vkGetInstanceProcAddr next_gipa;
  PFN_vkGetDeviceProcAddr next_gdpa;
  PFN_vkCreateDevice create;
  layer_device *ld;
  VkResult vr;
  if (!link || !link->u.pLayerInfo)
    return VK_ERROR_INITIALIZATION_FAILED;
  next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  create = li ? li->CreateDevice : (PFN_vkCreateDevice)next_gipa(VK_NULL_HANDLE, "vkCreateDevice");
  if (!create)
    return VK_ERROR_INITIALIZATION_FAILED;
  ld = pcache__calloc(1, sizeof *ld);
  if (!ld)
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  {
    layer_features features;
    const VkDeviceCreateInfo *down = layer_features_enable(li, physical_device, ci, &features);
    vr = create(physical_device, down, allocator, ret_device);
    ld->cache_control = features.enabled;
    ld->pipeline_binary = features.binary;
  }
  if (vr != VK_SUCCESS) {
    pcache__free(ld);
    return vr;
  }
  ld->key = layer_key(*ret_device);
  ld->device = *ret_device;
  ld->pid = getpid();
  ld->instance = li;
  ld->next_gdpa = next_gdpa;
  resolve_device(ld);
  layer_stats_init(&ld->stats);
  if (!ld->DestroyDevice || layer_registry_add_device(ld) < 0) {
    if (ld->DestroyDevice)
      ld->DestroyDevice(*ret_device, allocator);
    layer_stats_fini(&ld->stats);
    pcache__free(ld);
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
  if (li) {
    pcache_device_info info = PCACHE_STRUCT_INIT(pcache_device_info);
    info.instance = li->instance;
    info.physical_device = physical_device;
    info.device = *ret_device;
    /* Not the program's allocator: the core makes its caches from its own
     * upload thread too, and a program's callbacks may be called only from
     * the thread of the command that was given them. */
    info.allocator = NULL;
    /* The core calls only what the app's instance version allows: the
     * validation layer below would otherwise blame the app. */
    info.instance_api_version = li->api_version;
    info.cache_control = ld->cache_control;
    info.pipeline_binary = ld->pipeline_binary;
    /* Fails only for want of memory or of a core entry point; the device
     * then passes everything through. */
    pcache_device *pc = NULL;
    uint64_t t0 = pcache__mono_ns();
    if (pcache__device_create(li->client, &info, next_gipa, next_gdpa, &pc) == 0)
      ld->pc = pc;
    /* The connection's cost counted once, with the instance's first device. */
    ld->setup_us = (pcache__mono_ns() - t0) / 1000 + atomic_exchange(&li->open_us, 0);
  }
  layer_signals_watch(report_all_at_exit);
  return VK_SUCCESS;
}

/* What a short-lived program compiled must reach the daemon before it
 * exits, or the next run compiles again: a healthy daemon gets up to
 * PCACHE_LAYER_FLUSH_MS (default 2000) to take the uploads and the
 * snapshot, an absent or stalled one costs at most one client timeout. */
static void layer_drain(layer_device *ld, int at_exit) {
  if (!ld->pc)
    return;
  if (!at_exit)
    pcache__upload_want_snapshot(ld->pc);
  (void)pcache__upload_drain(ld->pc, pcache__env_ms("PCACHE_LAYER_FLUSH_MS", 2000, 0, 600000),
                             at_exit);
}

/* The end of a device's record while its VkDevice and the driver still
 * exist: the uploads, the report, then the core's cache and thread, and
 * the records of the program's caches it leaked. */
static void device_end(layer_device *ld) {
  layer_drain(ld, 0);
  layer_stats_report(ld);
  pcache_device_destroy(ld->pc);
  ld->pc = NULL;
  layer_registry_drop_caches(ld->key);
  layer_signals_unwatch();
}

static VKAPI_ATTR void VKAPI_CALL layer_DestroyDevice(VkDevice device,
                                                      const VkAllocationCallbacks *allocator) {
  layer_device *ld;
  if (device == VK_NULL_HANDLE)
    return;
  ld = layer_registry_remove_device(layer_key(device));
  if (!ld)
    return;
  device_end(ld);
  ld->DestroyDevice(device, allocator);
  layer_stats_fini(&ld->stats);
  pcache__free(ld);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetDeviceProcAddr(VkDevice device,
                                                                        const char *name);

/* Ours, for a name the layer intercepts, only when the next one has it too:
 * the layer never makes a function appear that the device lacks. */
static PFN_vkVoidFunction device_proc(const char *name) {
  if (!strcmp(name, "vkGetDeviceProcAddr"))
    return (PFN_vkVoidFunction)layer_GetDeviceProcAddr;
  if (!strcmp(name, "vkDestroyDevice"))
    return (PFN_vkVoidFunction)layer_DestroyDevice;
  PFN_vkVoidFunction f = layer_objects_proc(name);
  return f ? f : layer_pipelines_proc(name);
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetDeviceProcAddr(VkDevice device,
                                                                        const char *name) {
  layer_device *ld;
  PFN_vkVoidFunction next, ours;
  if (device == VK_NULL_HANDLE || !name)
    return NULL;
  ld = layer_registry_device(layer_key(device));
  if (!ld)
    return NULL;
  next = ld->next_gdpa(device, name);
  ours = device_proc(name);
  return next && ours ? ours : next;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetInstanceProcAddr(VkInstance instance,
                                                                          const char *name);

static PFN_vkVoidFunction instance_proc(const char *name) {
  if (!strcmp(name, "vkGetInstanceProcAddr"))
    return (PFN_vkVoidFunction)layer_GetInstanceProcAddr;
  if (!strcmp(name, "vkCreateInstance"))
    return (PFN_vkVoidFunction)layer_CreateInstance;
  if (!strcmp(name, "vkDestroyInstance"))
    return (PFN_vkVoidFunction)layer_DestroyInstance;
  if (!strcmp(name, "vkCreateDevice"))
    return (PFN_vkVoidFunction)layer_CreateDevice;
  /* A layer's vkGetInstanceProcAddr answers for its vkGetDeviceProcAddr,
   * so that whatever asks it builds device chains through the layer. */
  if (!strcmp(name, "vkGetDeviceProcAddr"))
    return (PFN_vkVoidFunction)layer_GetDeviceProcAddr;
  return NULL;
}

static VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL layer_GetInstanceProcAddr(VkInstance instance,
                                                                          const char *name) {
  layer_instance *li;
  PFN_vkVoidFunction ours, next;
  if (!name)
    return NULL;
  ours = instance_proc(name);
  if (ours && (instance == VK_NULL_HANDLE || strcmp(name, "vkCreateInstance") == 0))
    return ours;
  if (instance == VK_NULL_HANDLE)
    return NULL;
  li = layer_registry_instance(layer_key(instance));
  if (!li)
    return NULL;
  next = li->next_gipa(instance, name);
  /* Device functions are the loader's trampolines' business: it builds
   * each device's dispatch through vkGetDeviceProcAddr, where the layer
   * answers only for what that device has. */
  return next && ours ? ours : next;
}

/* The one exported symbol (see the version script). */
VK_LAYER_EXPORT VKAPI_ATTR VkResult VKAPI_CALL
vkNegotiateLoaderLayerInterfaceVersion(VkNegotiateLayerInterface *version) {
  if (!version || version->sType != LAYER_NEGOTIATE_INTERFACE_STRUCT)
    return VK_ERROR_INITIALIZATION_FAILED;
  if (version->loaderLayerInterfaceVersion < 2)
    return VK_ERROR_INITIALIZATION_FAILED;
  version->loaderLayerInterfaceVersion = 2;
  version->pfnGetInstanceProcAddr = layer_GetInstanceProcAddr;
  version->pfnGetDeviceProcAddr = layer_GetDeviceProcAddr;
  version->pfnGetPhysicalDeviceProcAddr = NULL;
  return VK_SUCCESS;
}

/* At exit, devices the app never destroyed: their queued uploads are sent
 * and their report is written. No Vulkan call is made (no snapshot, no
 * prefetch page: the driver may be gone). The library is never unmapped
 * (-z nodelete), so this runs at process exit, with the upload threads
 * still alive. */
static void flush_at_exit(layer_device *ld) {
  /* A forked child inherits the records but not the upload threads, and
   * shares the parent's connection: only the process that made the device
   * reports it. */
  if (ld->pid != getpid())
    return;
  layer_drain(ld, 1);
  layer_stats_report(ld);
}

static void report_all_at_exit(void) { layer_registry_each_device(flush_at_exit); }

/* Also at SIGTERM and SIGINT (signals.c). */
__attribute__((destructor)) static void layer_exit(void) { report_all_at_exit(); }
