/* How pcachectl shows times, vendors and driver versions to a person. */
#ifndef PCACHE_TOOLS_CTL_FORMAT_H
#define PCACHE_TOOLS_CTL_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* "never" (0), "just now", "12m ago", "3h ago" within a day of now, else
 * local "2026-11-21 19:30". */
void ctl_format_time(uint64_t when, time_t now, char *out, size_t out_size);

/* "NVIDIA", "AMD", "Intel", "Mesa", ... or "0x1234". */
const char *ctl_vendor_name(uint32_t vendor_id, char *buf, size_t buf_size);

/* The driver version the way its vendor numbers it: NVIDIA's 10.8.8.6
 * bits, else Vulkan's VK_API_VERSION packing. */
void ctl_format_driver_version(uint32_t vendor_id, uint32_t version, char *out, size_t out_size);

/* "graphics", "compute", "unspecified", or the number. */
const char *ctl_kind_name(uint32_t kind, char *buf, size_t buf_size);

/* The structure a VkStructureType number stands for
 * ("VkGraphicsPipelineLibraryCreateInfoEXT"), for the few the layer's
 * describer refuses most; NULL for the others, which show as numbers. */
const char *ctl_stype_name(uint32_t stype);

#endif
