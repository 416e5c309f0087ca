/* Binary mode: see binary.h. What the driver is asked, and why it can be
 * trusted with it:
 *   - the global pipeline key goes into the binary device key
 *     (pcache__devkey_binary), so binaries made before a change of it are
 *     never handed to the driver after it; it is read once, at device
 *     creation, through the guarded call (common/guarded_call.h: NVIDIA's
 *     vkGetPipelineKeyKHR was found breaking a callee-saved register);
 *   - RADV's global key was wrong before Mesa 24.3.0 (it did not change
 *     when the compiled code would), so binary mode is refused there;
 *   - every container is checked (common/binblob.c) before its binaries
 *     reach vkCreatePipelineBinariesKHR (build.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/binary.h"
#include "client/log.h"
#include "common/alloc.h"
#include "common/guarded_call.h"

/* RADV encodes Mesa's version as VK_MAKE_VERSION(major, minor, patch). */
static int radv_before_24_3(const pcache__core *d) {
  uint32_t v = pcache__devkey_driver_version(&d->key);
  if (d->driver_id != VK_DRIVER_ID_MESA_RADV)
    return 0;
  return VK_API_VERSION_MAJOR(v) < 24 ||
         (VK_API_VERSION_MAJOR(v) == 24 && VK_API_VERSION_MINOR(v) < 3);
}

int pcache__binary_open(VkDevice device, PFN_vkGetDeviceProcAddr gdpa,
                        const VkAllocationCallbacks *allocator, const pcache__devkey *base,
                        pcache__binary_vk *ret_vk, pcache__devkey *ret_key, VkResult *ret_vr,
                        int *ret_changed) {
  PFN_vkGetPipelineKeyKHR get_key;
  VkPipelineBinaryKeyKHR global = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR};
  pcache__binary_vk bv = {.device = device, .allocator = allocator};
  void *fn;
  *ret_vr = VK_SUCCESS;
  *ret_changed = 0;
#define DEV(name) bv.name = (PFN_vk##name##KHR)gdpa(device, "vk" #name "KHR")
  DEV(CreatePipelineBinaries);
  DEV(DestroyPipelineBinary);
  DEV(GetPipelineBinaryData);
  DEV(ReleaseCapturedPipelineData);
#undef DEV
  get_key = (PFN_vkGetPipelineKeyKHR)gdpa(device, "vkGetPipelineKeyKHR");
  if (!bv.CreatePipelineBinaries || !bv.DestroyPipelineBinary || !bv.GetPipelineBinaryData ||
      !bv.ReleaseCapturedPipelineData || !get_key)
    return PCACHE_ENOT_FOUND;
  memcpy(&fn, &get_key, sizeof fn);
  *ret_vr = (VkResult)pcache__guarded_call3(fn, (void *)device, NULL, &global, ret_changed);
  if (*ret_vr != VK_SUCCESS || global.keySize == 0 ||
      global.keySize > VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR)
    return PCACHE_EVULKAN;
  pcache__devkey_binary(base, global.key, global.keySize, ret_key);
  *ret_vk = bv;
  return 0;
}

void pcache__binary_setup(pcache__core *d, const pcache_device_info *info,
                          PFN_vkGetInstanceProcAddr gipa, PFN_vkGetDeviceProcAddr gdpa) {
  const char *env = getenv("PCACHE_BINARIES");
  int changed = 0, r;
  VkResult vr;
  if (!info->pipeline_binary || (env && env[0] == '0') || d->passthrough ||
      info->fast_link != PCACHE_FAST_LINK_NEVER)
    return;
  if (d->instance_api_version < VK_API_VERSION_1_3 || d->api_version < VK_API_VERSION_1_3)
    return;
  if (radv_before_24_3(d)) {
    pcache__log(d->log, PCACHE_SEVERITY_INFO,
                "pipeline binaries: RADV before Mesa 24.3 gives a wrong global pipeline key; "
                "VkPipelineCache data is stored instead");
    return;
  }
  if (!gdpa)
    gdpa = (PFN_vkGetDeviceProcAddr)gipa(d->instance, "vkGetDeviceProcAddr");
  if (!gdpa)
    return;
  r = pcache__binary_open(d->vk_device, gdpa, d->allocator, &d->key, &d->bin_vk, &d->bin_key, &vr,
                          &changed);
  if (changed)
    pcache__log(d->log, PCACHE_SEVERITY_DEBUG,
                "vkGetPipelineKeyKHR changed a callee-saved register; it was restored");
  if (r == PCACHE_EVULKAN)
    pcache__log(d->log, PCACHE_SEVERITY_INFO,
                "pipeline binaries: the driver gave no global pipeline key (VkResult %d); "
                "VkPipelineCache data is stored instead",
                (int)vr);
  d->binary = r == 0;
}

int pcache__binary_capture(const pcache__binary_vk *d, const pcache__devkey *bin_key,
                           VkPipeline pipeline, const VkAllocationCallbacks *allocator,
                           uint8_t **ret_blob, size_t *ret_size) {
  VkPipelineBinaryCreateInfoKHR ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR,
                                      .pipeline = pipeline};
  VkPipelineBinaryHandlesInfoKHR hi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_HANDLES_INFO_KHR};
  VkReleaseCapturedPipelineDataInfoKHR ri = {
      .sType = VK_STRUCTURE_TYPE_RELEASE_CAPTURED_PIPELINE_DATA_INFO_KHR, .pipeline = pipeline};
  VkPipelineBinaryKHR handles[PCACHE_BINBLOB_MAX_BINARIES];
  VkPipelineBinaryKeyKHR keys[PCACHE_BINBLOB_MAX_BINARIES];
  void *data[PCACHE_BINBLOB_MAX_BINARIES] = {0};
  pcache__binblob b = {0};
  uint32_t made = 0;
  size_t size;
  uint8_t *blob;
  int r = PCACHE_EVULKAN;
  VkResult vr = d->CreatePipelineBinaries(d->device, &ci, d->allocator, &hi);
  /* Its own code: PCACHE_EBINARY would read as a damaged store. */
  if (vr == VK_SUCCESS &&
      (hi.pipelineBinaryCount == 0 || hi.pipelineBinaryCount > PCACHE_BINBLOB_MAX_BINARIES)) {
    r = PCACHE_ECAPTURE;
    vr = VK_ERROR_UNKNOWN;
  }
  if (vr == VK_SUCCESS) {
    uint32_t asked = hi.pipelineBinaryCount;
    hi.pPipelineBinaries = handles;
    vr = d->CreatePipelineBinaries(d->device, &ci, d->allocator, &hi);
    /* The driver writes at most the count it was asked for; a larger one
     * back would have handles[] read past its end. */
    if (vr == VK_SUCCESS)
      made = hi.pipelineBinaryCount < asked ? hi.pipelineBinaryCount : asked;
  }
  /* The pipeline's captured data is needed no more, whatever happened. */
  d->ReleaseCapturedPipelineData(d->device, &ri, allocator);
  if (vr != VK_SUCCESS)
    goto out_binaries;
  for (uint32_t i = 0; i < made; i++) {
    VkPipelineBinaryDataInfoKHR di = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_DATA_INFO_KHR,
                                      .pipelineBinary = handles[i]};
    size_t n = 0;
    keys[i] = (VkPipelineBinaryKeyKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR};
    if (d->GetPipelineBinaryData(d->device, &di, &keys[i], &n, NULL) != VK_SUCCESS || n == 0)
      goto out_data;
    if (!(data[i] = pcache__malloc(n))) {
      r = -ENOMEM;
      goto out_data;
    }
    if (d->GetPipelineBinaryData(d->device, &di, &keys[i], &n, data[i]) != VK_SUCCESS)
      goto out_data;
    b.items[i] = (pcache__binblob_item){keys[i].keySize, keys[i].key, n, data[i]};
  }
  b.count = made;
  size = pcache__binblob_size(&b);
  r = PCACHE_ECAPTURE;
  if (size == 0)
    goto out_data;
  r = -ENOMEM;
  if (!(blob = pcache__malloc(size)))
    goto out_data;
  pcache__binblob_pack(bin_key, &b, blob);
  *ret_blob = blob;
  *ret_size = size;
  r = 0;
out_data:
  for (uint32_t i = 0; i < made; i++)
    pcache__free(data[i]);
out_binaries:
  pcache__binary_destroy(d, handles, made);
  return r;
}

VkResult pcache__binary_create(const pcache__binary_vk *d, const pcache__binblob *b,
                               VkPipelineBinaryKHR *ret_handles) {
  VkPipelineBinaryKeyKHR keys[PCACHE_BINBLOB_MAX_BINARIES];
  VkPipelineBinaryDataKHR data[PCACHE_BINBLOB_MAX_BINARIES];
  VkPipelineBinaryKeysAndDataKHR kd = {
      .binaryCount = b->count, .pPipelineBinaryKeys = keys, .pPipelineBinaryData = data};
  VkPipelineBinaryCreateInfoKHR ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_CREATE_INFO_KHR,
                                      .pKeysAndDataInfo = &kd};
  VkPipelineBinaryHandlesInfoKHR hi = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_HANDLES_INFO_KHR,
                                       .pipelineBinaryCount = b->count,
                                       .pPipelineBinaries = ret_handles};
  for (uint32_t i = 0; i < b->count; i++) {
    keys[i] = (VkPipelineBinaryKeyKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_KEY_KHR,
                                       .keySize = b->items[i].key_size};
    memcpy(keys[i].key, b->items[i].key, b->items[i].key_size);
    /* The driver only reads it; the struct's member is not const. */
    data[i] = (VkPipelineBinaryDataKHR){(size_t)b->items[i].data_size,
                                        (void *)(uintptr_t)b->items[i].data};
  }
  return d->CreatePipelineBinaries(d->device, &ci, d->allocator, &hi);
}

void pcache__binary_destroy(const pcache__binary_vk *d, const VkPipelineBinaryKHR *handles,
                            uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    d->DestroyPipelineBinary(d->device, handles[i], d->allocator);
}
