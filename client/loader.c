/* libpcache's public constructor of a device context. The only file of the
 * client that names a symbol of the Vulkan loader (vkGetInstanceProcAddr,
 * the default entry point): the Vulkan layer links the rest of the client
 * core but not this file, so the layer never binds to an app's global
 * named like a Vulkan function (volk-style loaders define those). */
#include <errno.h>

#include "client/abi.h"
#include "client/device.h"

PCACHE_API int pcache_device_create(pcache_client *client, const pcache_device_info *caller_info,
                                    pcache_device **ret_device) {
  pcache_device_info info;
  if (!caller_info || pcache__struct_in(&info, sizeof info, caller_info,
                                        PCACHE__V1_SIZE(pcache_device_info, no_prefetch)) < 0)
    return -EINVAL;
  return pcache__device_create(client, &info,
                               info.get_instance_proc_addr ? info.get_instance_proc_addr
                                                           : vkGetInstanceProcAddr,
                               NULL, ret_device);
}
