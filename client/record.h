/* Recording objects by content (record.c): after the driver made an object,
 * describe it and put it in the device's object map, so pipelines naming
 * its handle can be described. Shared by libpcache's wrappers
 * (wrappers.c) and the Vulkan layer (layer/objects.c): one describer for
 * both; pipeline libraries are recorded by the client core when it builds
 * them (build.c). An object whose description fails (unhashable, out of memory) still
 * works and is simply not recorded; pipelines naming it are then
 * unhashable. Never fails, never calls the driver. */
#ifndef PCACHE_CLIENT_RECORD_H
#define PCACHE_CLIENT_RECORD_H

#include "client/core.h"

void pcache__record_shader_module(pcache__core *device, const VkShaderModuleCreateInfo *info,
                                  VkShaderModule handle);
void pcache__record_set_layout(pcache__core *device, const VkDescriptorSetLayoutCreateInfo *info,
                               VkDescriptorSetLayout handle);
void pcache__record_pipeline_layout(pcache__core *device, const VkPipelineLayoutCreateInfo *info,
                                    VkPipelineLayout handle);
void pcache__record_render_pass(pcache__core *device, const VkRenderPassCreateInfo *info,
                                VkRenderPass handle);
void pcache__record_render_pass2(pcache__core *device, const VkRenderPassCreateInfo2 *info,
                                 VkRenderPass handle);
void pcache__record_sampler(pcache__core *device, const VkSamplerCreateInfo *info,
                            VkSampler handle);
/* A graphics pipeline library the client core built (build.c), by the
 * description and keys it was built from: pipelines linking it embed that
 * description. */
void pcache__record_pipeline_library(pcache__core *device, const pcache__desc_buf *desc,
                                     const pcache__desc_keys *keys, VkPipeline handle);

/* Forgets (type, handle) before the driver destroys it: the driver may
 * hand the same value to a new object. */
static inline void pcache__record_forget(pcache__core *device, uint32_t type, uint64_t handle) {
  pcache__objmap_remove(device->objects, type, handle);
}

#endif
