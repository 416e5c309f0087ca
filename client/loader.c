/* libpcache's public constructor of a device context, and where it finds
 * the Vulkan loader when the app gives no vkGetInstanceProcAddr.
 *
 * libpcache names no symbol of the Vulkan loader and does not link it
 * (libvulkan.so.1 is not in its DT_NEEDED): an app with a GL fallback must
 * start on a machine without Vulkan, and a reference to
 * vkGetInstanceProcAddr would be bound, by the dynamic linker's global
 * lookup, to whatever the process exports under that name first. A
 * volk-style app exports data objects named like Vulkan's functions, and
 * calling one of those crashed pcache_device_create. So the default entry
 * point is taken from libvulkan.so.1 itself: dlopen, then dlsym on that
 * handle, which searches that library (and what it loaded), never the
 * program's globals. The Vulkan layer links the rest of the client core
 * but not this file. */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "client/abi.h"
#include "client/device.h"

static pthread_once_t loader_once = PTHREAD_ONCE_INIT;
static PFN_vkGetInstanceProcAddr loader_gipa;

/* The handle is kept for the life of the process, as the app's own
 * reference to the loader would be: unloading the loader under live
 * instances is never right. */
static void open_loader(void) {
  void *lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    return;
  loader_gipa = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
}

PCACHE_API int pcache_device_create(pcache_client *client, const pcache_device_info *caller_info,
                                    pcache_device **ret_device) {
  pcache_device_info info;
  PFN_vkGetInstanceProcAddr gipa;
  if (!caller_info || pcache__struct_in(&info, sizeof info, caller_info,
                                        PCACHE__V1_SIZE(pcache_device_info, no_prefetch)) < 0)
    return -EINVAL;
  const char *env = getenv("PCACHE_PASSTHROUGH");
  if (env && env[0] == '1')
    info.passthrough = 1;
  gipa = info.get_instance_proc_addr;
  if (!gipa) {
    pthread_once(&loader_once, open_loader);
    gipa = loader_gipa;
  }
  if (!gipa) {
    pcache__device_info_set_result(&info, VK_ERROR_INITIALIZATION_FAILED);
    return -ENOENT;
  }
  return pcache__device_create(client, &info, gipa, NULL, ret_device);
}
