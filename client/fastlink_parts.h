/* Fast linking's parts (fastlink_parts.c): what fastlink.c builds a
 * pipeline from. A complete graphics pipeline's four
 * VK_EXT_graphics_pipeline_library parts, each described and found by its
 * part hash or built as a library, and the libraries linked. */
#ifndef PCACHE_CLIENT_FASTLINK_PARTS_H
#define PCACHE_CLIENT_FASTLINK_PARTS_H

#include "client/build.h"
#include "client/table.h"

#define PCACHE__FASTLINK_PARTS 4
/* The most stages a create info may have to go through fast linking. */
#define PCACHE__FASTLINK_MAX_STAGES 8

/* One part's create info: the app's, with the part's flag and only its
 * stages; the driver ignores the state of other parts. Do not copy. */
typedef struct pcache__fastlink_part {
  VkGraphicsPipelineCreateInfo ci;
  VkGraphicsPipelineLibraryCreateInfoEXT lib;
  VkPipelineShaderStageCreateInfo stages[PCACHE__FASTLINK_MAX_STAGES];
  pcache__build build;
  pcache__desc_buf desc;
  pcache__desc_keys keys;
} pcache__fastlink_part;

/* The four parts of b's pipeline (a create info for which
 * pcache__fastlink_applies): described into parts (the caller releases
 * parts[i].desc for i < *ret_described), then each found in table (part
 * state hash -> library) or built and kept there. Returns VK_SUCCESS with
 * *ret_found the parts that were there already,
 * VK_ERROR_FEATURE_NOT_PRESENT when a part cannot be described (nothing
 * built), or a part's VkResult. */
VkResult pcache__fastlink_get_parts(pcache_device *device, pcache__table *table,
                                    const pcache__build *b,
                                    pcache__fastlink_part parts[PCACHE__FASTLINK_PARTS],
                                    VkPipeline libraries[PCACHE__FASTLINK_PARTS],
                                    uint32_t *ret_described, uint32_t *ret_found);

/* A library of the parts table, destroyed (the table's free callback;
 * ctx is the device). */
void pcache__fastlink_free_library(uint64_t value, void *ctx);

/* The libraries linked (flags: 0 or link-time optimization) through cache;
 * the device cache under its read side. */
VkResult pcache__fastlink_link(pcache_device *device,
                               const VkPipeline libraries[PCACHE__FASTLINK_PARTS],
                               VkPipelineLayout layout, VkPipelineCreateFlags flags,
                               VkPipelineCache cache, VkPipeline *ret_pipeline);

/* The optimized pipeline, compiled through a fresh cache whose data is
 * kept (device cache, upload) under kept's state hash. kept's module
 * references are released. */
VkResult pcache__fastlink_optimize(pcache_device *device,
                                   const VkPipeline libraries[PCACHE__FASTLINK_PARTS],
                                   VkPipelineLayout layout, pcache__build_kept *kept,
                                   VkPipeline *ret_pipeline);

#endif
