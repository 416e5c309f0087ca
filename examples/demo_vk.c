/* pcache-demo's Vulkan set-up: see demo_vk.h. */
#include "demo_vk.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

static int has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(exts[i].extensionName, name))
      return 1;
  return 0;
}

int demo_vk_init(const demo_options *opts, demo_vk *ret_vk) {
  demo_vk vk = {0};
  uint32_t api = VK_API_VERSION_1_0, count = 0, queue_family = UINT32_MAX, n_ext = 0;
  VkPhysicalDevice *devices = NULL;
  VkQueueFamilyProperties *families = NULL;
  VkExtensionProperties *exts = NULL;
  const char *enabled[1];
  uint32_t n_enabled = 0;
  VkResult vr;
  int r = -EIO;

  /* Ask for 1.3 where the loader has it: creation feedback is core there. */
  if (vkEnumerateInstanceVersion(&api) != VK_SUCCESS)
    api = VK_API_VERSION_1_0;
  if (api > VK_API_VERSION_1_3)
    api = VK_API_VERSION_1_3;
  vk.api_version = api;

  VkApplicationInfo app = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = opts->app_name,
      .applicationVersion = 1,
      .pEngineName = DEMO_NAME,
      .apiVersion = api,
  };
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  vr = vkCreateInstance(&ici, NULL, &vk.instance);
  if (vr != VK_SUCCESS) {
    log_err("vkCreateInstance: VkResult %d (is a Vulkan driver installed? Debian: "
            "mesa-vulkan-drivers)",
            (int)vr);
    return -EIO;
  }

  vr = vkEnumeratePhysicalDevices(vk.instance, &count, NULL);
  if (vr != VK_SUCCESS || count == 0) {
    log_err("no Vulkan physical device");
    goto out_instance;
  }
  devices = calloc(count, sizeof *devices);
  if (!devices) {
    r = -ENOMEM;
    goto out_instance;
  }
  vkEnumeratePhysicalDevices(vk.instance, &count, devices);
  if (opts->device_index >= count) {
    log_err("--device %" PRIu32 ": only %" PRIu32 " device(s)", opts->device_index, count);
    r = -EINVAL;
    goto out_free;
  }
  vk.physical_device = devices[opts->device_index];
  vkGetPhysicalDeviceProperties(vk.physical_device, &vk.props);

  vkGetPhysicalDeviceQueueFamilyProperties(vk.physical_device, &count, NULL);
  families = calloc(count ? count : 1, sizeof *families);
  if (!families) {
    r = -ENOMEM;
    goto out_free;
  }
  vkGetPhysicalDeviceQueueFamilyProperties(vk.physical_device, &count, families);
  for (uint32_t i = 0; i < count && queue_family == UINT32_MAX; i++)
    if (families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)
      queue_family = i;
  if (queue_family == UINT32_MAX) {
    log_err("%s has no graphics queue", vk.props.deviceName);
    goto out_free;
  }

  vkEnumerateDeviceExtensionProperties(vk.physical_device, NULL, &n_ext, NULL);
  exts = calloc(n_ext ? n_ext : 1, sizeof *exts);
  if (!exts) {
    r = -ENOMEM;
    goto out_free;
  }
  vkEnumerateDeviceExtensionProperties(vk.physical_device, NULL, &n_ext, exts);
  /* Creation feedback is how the demo learns that the driver's cache hit. */
  if (has_extension(exts, n_ext, VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME)) {
    enabled[n_enabled++] = VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME;
    vk.creation_feedback = 1;
  }
  if (api >= VK_API_VERSION_1_3 && vk.props.apiVersion >= VK_API_VERSION_1_3)
    vk.creation_feedback = 1;
  /* libpcache asks the driver's own caches first when the device allows
   * FAIL_ON_PIPELINE_COMPILE_REQUIRED (pcache_device_info.cache_control).
   * The plain program asks for nothing beyond the defaults: through the
   * layer, the layer enables it itself. */
  VkPhysicalDevicePipelineCreationCacheControlFeatures cache_control = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES};
  if (!opts->plain && api >= VK_API_VERSION_1_3 && vk.props.apiVersion >= VK_API_VERSION_1_3) {
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &cache_control};
    vkGetPhysicalDeviceFeatures2(vk.physical_device, &f2);
    cache_control.pNext = NULL;
    vk.cache_control = cache_control.pipelineCreationCacheControl == VK_TRUE;
  }

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = queue_family,
      .queueCount = 1,
      .pQueuePriorities = &priority,
  };
  VkDeviceCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = vk.cache_control ? &cache_control : NULL,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qci,
      .enabledExtensionCount = n_enabled,
      .ppEnabledExtensionNames = n_enabled ? enabled : NULL,
  };
  vr = vkCreateDevice(vk.physical_device, &dci, NULL, &vk.device);
  if (vr != VK_SUCCESS) {
    log_err("vkCreateDevice: VkResult %d", (int)vr);
    goto out_free;
  }

  free(exts);
  free(families);
  free(devices);
  *ret_vk = vk;
  return 0;

out_free:
  free(exts);
  free(families);
  free(devices);
out_instance:
  vkDestroyInstance(vk.instance, NULL);
  return r;
}

void demo_vk_fini(demo_vk *vk) {
  if (vk->device)
    vkDestroyDevice(vk->device, NULL);
  if (vk->instance)
    vkDestroyInstance(vk->instance, NULL);
}

VkFormat demo_depth_format(VkPhysicalDevice pd) {
  static const VkFormat candidates[] = {VK_FORMAT_D32_SFLOAT, VK_FORMAT_X8_D24_UNORM_PACK32,
                                        VK_FORMAT_D16_UNORM};
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    VkFormatProperties fp;
    vkGetPhysicalDeviceFormatProperties(pd, candidates[i], &fp);
    if (fp.optimalTilingFeatures & VK_FORMAT_FEATURE_DEPTH_STENCIL_ATTACHMENT_BIT)
      return candidates[i];
  }
  return VK_FORMAT_D16_UNORM; /* required by the spec */
}

int demo_is_software_driver(const VkPhysicalDeviceProperties *props) {
  return props->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
         strstr(props->deviceName, "llvmpipe") || strstr(props->deviceName, "lavapipe");
}
