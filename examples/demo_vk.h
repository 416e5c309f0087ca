/* pcache-demo's Vulkan set-up (demo_vk.c): an instance, the device the
 * loader lists at --device, and what that device supports of what the
 * demo uses (creation feedback, cache control). Nothing here knows
 * pcache: any app makes these. */
#ifndef PCACHE_EXAMPLES_DEMO_VK_H
#define PCACHE_EXAMPLES_DEMO_VK_H

#include <vulkan/vulkan.h>

#include "demo.h"

typedef struct demo_vk {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  VkPhysicalDeviceProperties props;
  int creation_feedback;
  int cache_control;    /* pipelineCreationCacheControl enabled */
  uint32_t api_version; /* what the instance asked for */
} demo_vk;

/* The instance and device for opts (--device, --app-name, and --plain,
 * which enables nothing beyond the defaults). 0, -EINVAL or -ENOMEM, or
 * -EIO when Vulkan refused (said on stderr). */
int demo_vk_init(const demo_options *opts, demo_vk *ret_vk);
void demo_vk_fini(demo_vk *vk);
/* A depth format the device can render to. */
VkFormat demo_depth_format(VkPhysicalDevice pd);
/* A CPU driver (lavapipe): its cache holds no compiled code. */
int demo_is_software_driver(const VkPhysicalDeviceProperties *props);

#endif
