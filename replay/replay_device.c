/* pcache-replay's VkDevice (replay_device.h). It is made the way apps
 * make theirs, as far as a replayer can know it: every core feature the
 * driver has except the robustness ones (drivers put robustness into
 * their pipeline keys, and few apps enable it, so a replayed blob built
 * with it would miss for them), and the extensions a stored description
 * may need (pipeline libraries, creation feedback). Apart from replay_vk.c
 * since both a replay and the probe's binary keys (--list-keys --binary)
 * make one. */
#include "replay_device.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* VK_KHR_pipeline_binary and maintenance5, newer than the headers pcache
 * builds with. */
#include "client/vkext.h"

/* Extensions enabled when the driver has them: what stored descriptions
 * may chain (docs/pipeline-desc.md, "Known structs"). */
static const char *const wanted_extensions[] = {
    VK_KHR_PIPELINE_LIBRARY_EXTENSION_NAME,
    VK_EXT_GRAPHICS_PIPELINE_LIBRARY_EXTENSION_NAME,
    VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME,
    VK_EXT_VERTEX_ATTRIBUTE_DIVISOR_EXTENSION_NAME,
    VK_EXT_TRANSFORM_FEEDBACK_EXTENSION_NAME,
    VK_EXT_CONSERVATIVE_RASTERIZATION_EXTENSION_NAME,
    VK_EXT_LINE_RASTERIZATION_EXTENSION_NAME,
    VK_EXT_DEPTH_CLIP_ENABLE_EXTENSION_NAME,
    VK_EXT_PROVOKING_VERTEX_EXTENSION_NAME,
    VK_EXT_COLOR_WRITE_ENABLE_EXTENSION_NAME,
    VK_EXT_CUSTOM_BORDER_COLOR_EXTENSION_NAME,
    VK_EXT_DEPTH_CLIP_CONTROL_EXTENSION_NAME,
    VK_EXT_EXTENDED_DYNAMIC_STATE_EXTENSION_NAME,
    VK_EXT_EXTENDED_DYNAMIC_STATE_2_EXTENSION_NAME,
    VK_EXT_VERTEX_INPUT_DYNAMIC_STATE_EXTENSION_NAME,
};

/* The two extensions a binary replay's device needs (pipeline binaries
 * require maintenance5), found in exts[n]: 1 when both are there. */
static int have_binary_extensions(const VkExtensionProperties *exts, uint32_t n) {
  int have = 0;
  for (uint32_t i = 0; i < n; i++)
    have += !strcmp(exts[i].extensionName, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME) ||
            !strcmp(exts[i].extensionName, VK_KHR_MAINTENANCE_5_EXTENSION_NAME);
  return have == 2;
}

int pcache__replay_make_device(VkPhysicalDevice physical_device, uint32_t api_version, int binary,
                               VkDevice *ret_device) {
  VkExtensionProperties exts[512];
  const char *enabled[sizeof wanted_extensions / sizeof *wanted_extensions + 2];
  VkPhysicalDevicePipelineBinaryFeaturesKHR fbin = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR};
  VkPhysicalDeviceMaintenance5FeaturesKHR fm5 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR, .pNext = &fbin};
  uint32_t n = 512, n_enabled = 0, family = 0, n_fam = 16;
  VkQueueFamilyProperties fams[16];
  VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT gpl = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT};
  VkPhysicalDeviceVulkan13Features f13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13};
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
  VkPhysicalDeviceFeatures2 features = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  int have_gpl = 0;
  /* Bench probe (docs/replay.md): "bare" enables no feature and only
   * creation feedback, as pcache-demo does; "no-ext" the features alone;
   * "no-features" the extensions alone. */
  const char *probe = getenv("PCACHE_REPLAY_TEST_DEVICE");
  int want_ext = !probe || (strcmp(probe, "bare") != 0 && strcmp(probe, "no-ext") != 0);
  int want_features = !probe || (strcmp(probe, "bare") != 0 && strcmp(probe, "no-features") != 0);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_device, &n_fam, fams);
  for (family = 0; family < n_fam; family++)
    if (fams[family].queueFlags & (VK_QUEUE_GRAPHICS_BIT | VK_QUEUE_COMPUTE_BIT))
      break;
  if (family == n_fam)
    return -EIO;
  qci.queueFamilyIndex = family;
  if (vkEnumerateDeviceExtensionProperties(physical_device, NULL, &n, exts) < 0)
    n = 0;
  for (size_t w = 0; w < sizeof wanted_extensions / sizeof *wanted_extensions; w++)
    for (uint32_t i = 0; i < n; i++)
      if (strcmp(exts[i].extensionName, wanted_extensions[w]) == 0 &&
          (want_ext ||
           strcmp(wanted_extensions[w], VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME) == 0)) {
        enabled[n_enabled++] = wanted_extensions[w];
        have_gpl |=
            strcmp(wanted_extensions[w], VK_EXT_GRAPHICS_PIPELINE_LIBRARY_EXTENSION_NAME) == 0;
      }
  /* The core features, robustness left out (see the top of the file). */
  if (api_version >= VK_API_VERSION_1_3)
    features.pNext = &f11;
  else if (api_version >= VK_API_VERSION_1_2)
    features.pNext = &f11, f12.pNext = NULL;
  if (have_gpl) {
    gpl.pNext = features.pNext;
    features.pNext = &gpl;
  }
  /* Asked only of a device that lists both: the structs are unknown to
   * one that does not. */
  if (binary) {
    if (!have_binary_extensions(exts, n))
      return -EIO;
    enabled[n_enabled++] = VK_KHR_MAINTENANCE_5_EXTENSION_NAME;
    enabled[n_enabled++] = VK_KHR_PIPELINE_BINARY_EXTENSION_NAME;
    fbin.pNext = features.pNext;
    features.pNext = &fm5;
  }
  vkGetPhysicalDeviceFeatures2(physical_device, &features);
  if (binary && (!fbin.pipelineBinaries || !fm5.maintenance5))
    return -EIO;
  features.features.robustBufferAccess = VK_FALSE;
  f13.robustImageAccess = VK_FALSE;
  dci.pNext = want_features ? &features : NULL;
  if (binary && !want_features) { /* the bench probe's device, with the two features alone */
    fbin.pNext = NULL;
    dci.pNext = &fm5;
  }
  dci.enabledExtensionCount = n_enabled;
  dci.ppEnabledExtensionNames = n_enabled ? enabled : NULL;
  return vkCreateDevice(physical_device, &dci, NULL, ret_device) == VK_SUCCESS ? 0 : -EIO;
}
