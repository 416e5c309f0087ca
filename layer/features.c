/* What the layer changes in what a program asks of vkCreateDevice:
 *
 * - the pipelineCreationCacheControl feature, so that a pipeline the layer
 *   has not built yet can be asked of the driver's own caches first, with
 *   VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT
 *   (client/build.c, "driver first"). The feature only allows that flag; a
 *   device with it behaves as one without for every call that does not
 *   pass it.
 * - VK_KHR_pipeline_binary (and VK_KHR_maintenance5, which it needs, when
 *   the program did not enable it), with their pipelineBinaries and
 *   maintenance5 features, where the device has them: pipelines are then
 *   stored as the driver's binaries (client/binary.c, docs/client.md
 *   "Pipeline binaries"). Both only allow new calls and flags; a device
 *   with them behaves as one without for every call that does not use
 *   them. Only with $PCACHE_BINARIES=1, for now: pcache-replay does not
 *   build binaries yet, so after a driver update binary entries would
 *   wait (docs/client.md, "Pipeline binaries").
 *
 * Only where the device's effective version (the lower of the program's
 * instance version and the device's own) is 1.3, where cache control is
 * core: enabling VK_EXT_pipeline_creation_cache_control for a program
 * that did not ask for it would add an extension to its device, for a
 * feature every 1.3 device has. The extension list is a copy: the
 * program's array is never written. */
#include <stdlib.h>
#include <string.h>

#include "layer/layer.h"

/* The first member of sType's struct in the program's chain that
 * carries a feature, or NULL. */
static VkBool32 *find_member(const VkDeviceCreateInfo *ci, VkStructureType stype,
                             VkStructureType core_stype, size_t offset, size_t core_offset) {
  for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext) {
    if (s->sType == core_stype && core_offset)
      return (VkBool32 *)((uint8_t *)s + core_offset);
    if (s->sType == stype)
      return (VkBool32 *)((uint8_t *)s + offset);
  }
  return NULL;
}

static VkBool32 *cache_control_member(const VkDeviceCreateInfo *ci) {
  return find_member(
      ci, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES,
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
      offsetof(VkPhysicalDevicePipelineCreationCacheControlFeatures, pipelineCreationCacheControl),
      offsetof(VkPhysicalDeviceVulkan13Features, pipelineCreationCacheControl));
}

static VkBool32 *binary_member(const VkDeviceCreateInfo *ci) {
  return find_member(ci, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR, 0,
                     offsetof(VkPhysicalDevicePipelineBinaryFeaturesKHR, pipelineBinaries), 0);
}

static VkBool32 *maintenance5_member(const VkDeviceCreateInfo *ci) {
  return find_member(ci, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR, 0,
                     offsetof(VkPhysicalDeviceMaintenance5FeaturesKHR, maintenance5), 0);
}

static int enabled_ext(const VkDeviceCreateInfo *ci, const char *name) {
  for (uint32_t i = 0; i < ci->enabledExtensionCount; i++)
    if (!strcmp(ci->ppEnabledExtensionNames[i], name))
      return 1;
  return 0;
}

/* What the device offers: the cache-control feature (*ret_binary: and the
 * two binary extensions with their features). */
static int supported(const layer_instance *li, VkPhysicalDevice physical_device, int *ret_binary) {
  PFN_vkGetPhysicalDeviceProperties props_fn;
  PFN_vkGetPhysicalDeviceFeatures2 features_fn;
  PFN_vkEnumerateDeviceExtensionProperties exts_fn;
  VkPhysicalDeviceProperties props;
  VkPhysicalDevicePipelineBinaryFeaturesKHR fbin = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR};
  VkPhysicalDeviceMaintenance5FeaturesKHR fm5 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR};
  VkPhysicalDeviceVulkan13Features f13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &f13};
  VkExtensionProperties *exts = NULL;
  uint32_t n = 0, have = 0;
  const char *env = getenv("PCACHE_BINARIES");
  *ret_binary = 0;
  if (li->api_version < VK_API_VERSION_1_3)
    return 0;
  props_fn = (PFN_vkGetPhysicalDeviceProperties)li->next_gipa(li->instance,
                                                              "vkGetPhysicalDeviceProperties");
  features_fn =
      (PFN_vkGetPhysicalDeviceFeatures2)li->next_gipa(li->instance, "vkGetPhysicalDeviceFeatures2");
  exts_fn = (PFN_vkEnumerateDeviceExtensionProperties)li->next_gipa(
      li->instance, "vkEnumerateDeviceExtensionProperties");
  if (!props_fn || !features_fn)
    return 0;
  props_fn(physical_device, &props);
  if (props.apiVersion < VK_API_VERSION_1_3)
    return 0;
  /* Asked only of a device that lists both extensions: the structs are
   * unknown to one that does not. */
  if (env && env[0] == '1' && exts_fn &&
      exts_fn(physical_device, NULL, &n, NULL) == VK_SUCCESS && n > 0 &&
      (exts = pcache__calloc(n, sizeof *exts)) != NULL &&
      exts_fn(physical_device, NULL, &n, exts) >= 0) {
    for (uint32_t i = 0; i < n; i++)
      if (!strcmp(exts[i].extensionName, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME) ||
          !strcmp(exts[i].extensionName, VK_KHR_MAINTENANCE_5_EXTENSION_NAME))
        have++;
  }
  pcache__free(exts);
  if (have == 2) {
    fm5.pNext = &fbin;
    f13.pNext = &fm5;
  }
  features_fn(physical_device, &f2);
  *ret_binary = have == 2 && fbin.pipelineBinaries && fm5.maintenance5;
  return f13.pipelineCreationCacheControl == VK_TRUE;
}

/* Sets the program's member for the call, or prepends ours. */
static void want(layer_features *f, VkBool32 *member, VkBaseOutStructure *ours,
                 VkBool32 *our_member) {
  if (member) {
    if (!*member) {
      for (size_t i = 0; i < 3; i++)
        if (!f->flipped[i]) {
          f->flipped[i] = member;
          break;
        }
      *member = VK_TRUE;
    }
    return;
  }
  *our_member = VK_TRUE;
  ours->pNext = (VkBaseOutStructure *)f->ci.pNext;
  f->ci.pNext = ours;
}

const VkDeviceCreateInfo *layer_features_enable(const layer_instance *li,
                                                VkPhysicalDevice physical_device,
                                                const VkDeviceCreateInfo *ci, layer_features *f) {
  VkBool32 *cc = cache_control_member(ci), *bin = binary_member(ci);
  int can_binary = 0, can_cc;
  memset(f, 0, sizeof *f);
  f->ci = *ci;
  /* The program enabled binaries itself: they are used only as it did. */
  if (enabled_ext(ci, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME))
    f->binary = bin && *bin;
  if (cc && *cc)
    f->enabled = 1; /* the program enabled it itself */
  if (!li || (f->enabled && (f->binary || enabled_ext(ci, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME))))
    return ci;
  can_cc = supported(li, physical_device, &can_binary);
  if (!can_cc)
    return ci;
  if (!f->enabled) {
    f->enabled = 1;
    /* The program's own features struct, set for the call and put back
     * after it: a second struct carrying the same feature is invalid
     * beside it, and the chain is the program's, not ours to copy. */
    f->feature.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES;
    want(f, cc, (VkBaseOutStructure *)&f->feature, &f->feature.pipelineCreationCacheControl);
  }
  if (can_binary && !enabled_ext(ci, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME) &&
      ci->enabledExtensionCount + 2 <= LAYER_MAX_EXTENSIONS) {
    uint32_t n = ci->enabledExtensionCount;
    if (n)
      memcpy(f->extensions, ci->ppEnabledExtensionNames, n * sizeof *f->extensions);
    f->extensions[n++] = VK_KHR_PIPELINE_BINARY_EXTENSION_NAME;
    if (!enabled_ext(ci, VK_KHR_MAINTENANCE_5_EXTENSION_NAME))
      f->extensions[n++] = VK_KHR_MAINTENANCE_5_EXTENSION_NAME;
    f->ci.enabledExtensionCount = n;
    f->ci.ppEnabledExtensionNames = f->extensions;
    f->binary_feature.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR;
    want(f, bin, (VkBaseOutStructure *)&f->binary_feature, &f->binary_feature.pipelineBinaries);
    f->maintenance5_feature.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR;
    want(f, maintenance5_member(ci), (VkBaseOutStructure *)&f->maintenance5_feature,
         &f->maintenance5_feature.maintenance5);
    f->binary = 1;
  }
  return &f->ci;
}

void layer_features_restore(layer_features *f) {
  for (size_t i = 0; i < 3; i++) {
    if (f->flipped[i])
      *f->flipped[i] = VK_FALSE;
    f->flipped[i] = NULL;
  }
}
