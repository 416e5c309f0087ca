/* Binary mode (binary.c, docs/client.md "Pipeline binaries"): a device
 * whose pipelines are stored as the driver's VK_KHR_pipeline_binary data,
 * in containers of common/binblob.h, under the binary device key. */
#ifndef PCACHE_CLIENT_BINARY_H
#define PCACHE_CLIENT_BINARY_H

#include "client/core.h"
#include "common/binblob.h"

/*
 * pcache__binary_setup - turns binary mode on for d (d->binary, d->bin_key,
 * the extension's entry points) when the app says it enabled the extension
 * (info->pipeline_binary), $PCACHE_BINARIES is not 0, the effective
 * version is 1.3, fast_link is off, the driver is not a RADV whose global
 * key was wrong, and the driver gives its global pipeline key. Otherwise d
 * stays in VkPipelineCache mode. After identify (device.c).
 */
void pcache__binary_setup(pcache__core *d, const pcache_device_info *info,
                          PFN_vkGetInstanceProcAddr gipa, PFN_vkGetDeviceProcAddr gdpa);

/*
 * pcache__binary_capture - the binaries of a pipeline created with
 * VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR, read back into a container
 * for d's binary key (*ret_blob, pcache__free'd by the caller). The
 * captured data is released in every case (allocator: the pipeline's).
 * 0, -ENOMEM, PCACHE_EVULKAN, or PCACHE_EBINARY (more binaries or larger
 * ones than a container holds).
 */
int pcache__binary_capture(pcache__core *d, VkPipeline pipeline,
                           const VkAllocationCallbacks *allocator, uint8_t **ret_blob,
                           size_t *ret_size);

/* Creates the binaries of a checked container (ret_handles holds
 * PCACHE_BINBLOB_MAX_BINARIES): the driver's VkResult. */
VkResult pcache__binary_create(pcache__core *d, const pcache__binblob *b,
                               VkPipelineBinaryKHR *ret_handles);

void pcache__binary_destroy(pcache__core *d, const VkPipelineBinaryKHR *handles, uint32_t n);

#endif
