/* Blobs into the device cache: every blob the daemon sends is checked
 * (checksum, then the pipeline-cache header against this device) before
 * the driver sees it, loaded into a cache of its own, and merged into the
 * device cache; refused ones are reported back to the daemon. */
#include <errno.h>

#include "client/device.h"
#include "client/blobs.h"
#include "client/client.h"
#include "client/reports.h"
#include "common/blob.h"

int pcache__blob_load(pcache_device *device, const uint8_t *blob, size_t size, uint64_t checksum,
                      VkPipelineCache *ret_cache, Pcachepb__ReportReason *ret_reason) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  /* Nothing unverified reaches the driver: a corrupted body can make
   * vkCreatePipelineCache fail or worse, another device's data never hits. */
  if (!blob || pcache__checksum64(blob, size) != checksum) {
    *ret_reason = PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM;
    return -EINVAL;
  }
  if (pcache__blob_check_header(blob, size, &device->core.key) != 0) {
    *ret_reason = PCACHEPB__REPORT_REASON__REPORT_REASON_HEADER;
    return -EINVAL;
  }
  /* Each blob is loaded alone, so one the driver refuses loses only itself. */
  ci.initialDataSize = size;
  ci.pInitialData = blob;
  if (device->core.CreatePipelineCache(device->core.vk_device, &ci, device->core.allocator,
                                       ret_cache) != VK_SUCCESS) {
    *ret_reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
    return -EINVAL;
  }
  return 0;
}

/* One vkMergePipelineCaches for them all:
 * merging one at a time costs more per blob the bigger the device cache
 * grows (66 us a blob at 2048 on NVIDIA, against 28 at 256). Only when the
 * driver refuses the lot are they merged one by one, to find which. */
void pcache__blob_merge_loaded(pcache_device *device, const VkPipelineCache *caches, size_t n,
                               uint8_t *ret_ok) {
  VkResult vr;
  if (n == 0)
    return;
  pthread_rwlock_wrlock(&device->core.cache_lock);
  vr = device->core.MergePipelineCaches(device->core.vk_device, device->core.cache, (uint32_t)n,
                                        caches);
  if (vr == VK_SUCCESS) {
    memset(ret_ok, 1, n);
  } else {
    for (size_t i = 0; i < n; i++)
      ret_ok[i] = device->core.MergePipelineCaches(device->core.vk_device, device->core.cache, 1,
                                                   &caches[i]) == VK_SUCCESS;
  }
  pthread_rwlock_unlock(&device->core.cache_lock);
  for (size_t i = 0; i < n; i++)
    device->core.DestroyPipelineCache(device->core.vk_device, caches[i], device->core.allocator);
}

int pcache__blob_merge(pcache_device *device, const uint8_t *blob, size_t size, uint64_t checksum,
                       Pcachepb__ReportReason *ret_reason) {
  VkPipelineCache src;
  uint8_t ok = 0;
  int r = pcache__blob_load(device, blob, size, checksum, &src, ret_reason);
  if (r < 0)
    return r;
  pcache__blob_merge_loaded(device, &src, 1, &ok);
  if (!ok) {
    *ret_reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
    return -EINVAL;
  }
  return 0;
}

void pcache__blob_report(pcache_device *device, const Pcachepb__ReportItem *const *items,
                         size_t n_items) {
  for (size_t i = 0; i < n_items; i++) {
    static const char site[] = "refused_blob";
    uint32_t why = (uint32_t)items[i]->reason;
    pcache__log_limited(device->core.log, PCACHE_SEVERITY_WARNING, site, why, 0,
                        "a blob from pcached was refused (%s); the daemon is told to drop it and "
                        "its pipeline is compiled",
                        why == PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM ? "checksum mismatch"
                        : why == PCACHEPB__REPORT_REASON__REPORT_REASON_HEADER
                            ? "made for another device or driver"
                            : "the driver refused it");
  }
  /* Sent by the upload thread (reports.h): never on the app's path. */
  if (n_items > 0 && device->core.client)
    pcache__refused_queue(device, items, n_items);
}
