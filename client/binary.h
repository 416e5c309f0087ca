/* Binary mode (binary.c, docs/client.md "Pipeline binaries"): a device
 * whose pipelines are stored as the driver's VK_KHR_pipeline_binary data,
 * in containers of common/binblob.h, under the binary device key. */
#ifndef PCACHE_CLIENT_BINARY_H
#define PCACHE_CLIENT_BINARY_H

#include "client/core.h"
#include "common/binblob.h"

/* What to do about PCACHE_ECAPTURE, in libpcache's log: the driver stays
 * as it is, but the same pipelines are stored the other way
 * (pcache__binary_setup reads the variable). pcache-replay says its own
 * (pcache__replay_vk_fix): the replayer reads no such variable. */
#define PCACHE__BINARY_CAPTURE_FIX                                                                 \
  "run the program with PCACHE_BINARIES=0 to store VkPipelineCache data instead"

/*
 * pcache__binary_open - the VK_KHR_pipeline_binary entry points of device
 * (created with the extension and its pipelineBinaries feature) into
 * *ret_vk (allocator: the binaries'), and its binary key into *ret_key:
 * base with the driver's global pipeline key, asked through the guarded
 * call (common/guarded_call.h). *ret_changed says whether that call broke
 * a callee-saved register (restored), *ret_vr its VkResult. For libpcache's
 * devices (pcache__binary_setup) and pcache-replay's (replay/replay_vk.c).
 * Returns 0, PCACHE_ENOT_FOUND (an entry point is missing) or
 * PCACHE_EVULKAN (no global key); *ret_vk and *ret_key are set on 0 only.
 */
int pcache__binary_open(VkDevice device, PFN_vkGetDeviceProcAddr gdpa,
                        const VkAllocationCallbacks *allocator, const pcache__devkey *base,
                        pcache__binary_vk *ret_vk, pcache__devkey *ret_key, VkResult *ret_vr,
                        int *ret_changed);

/*
 * pcache__binary_setup - turns binary mode on for d (d->binary, d->bin_key,
 * d->bin_vk) when the app says it enabled the extension
 * (info->pipeline_binary), $PCACHE_BINARIES is not 0, the effective
 * version is 1.3, fast_link is off, the driver is not a RADV whose global
 * key was wrong, and pcache__binary_open succeeds. Otherwise d stays in
 * VkPipelineCache mode. After identify (device.c).
 */
void pcache__binary_setup(pcache__core *d, const pcache_device_info *info,
                          PFN_vkGetInstanceProcAddr gipa, PFN_vkGetDeviceProcAddr gdpa);

/*
 * pcache__binary_capture - the binaries of a pipeline created with
 * VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR on bv's device, read back into
 * a container for bin_key (*ret_blob, pcache__free'd by the caller). The
 * captured data is released in every case (allocator: the pipeline's).
 * 0, -ENOMEM, PCACHE_EVULKAN, or PCACHE_ECAPTURE (no binaries, or more
 * or larger ones than a container holds: the driver's doing, which
 * PCACHE__BINARY_CAPTURE_FIX says how to avoid).
 */
int pcache__binary_capture(const pcache__binary_vk *bv, const pcache__devkey *bin_key,
                           VkPipeline pipeline, const VkAllocationCallbacks *allocator,
                           uint8_t **ret_blob, size_t *ret_size);

/* Creates the binaries of a checked container (ret_handles holds
 * PCACHE_BINBLOB_MAX_BINARIES): the driver's VkResult. */
VkResult pcache__binary_create(const pcache__binary_vk *bv, const pcache__binblob *b,
                               VkPipelineBinaryKHR *ret_handles);

void pcache__binary_destroy(const pcache__binary_vk *bv, const VkPipelineBinaryKHR *handles,
                            uint32_t n);

#endif
