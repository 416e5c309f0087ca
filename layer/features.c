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

/* VkPhysicalDeviceVulkan14Features (Vulkan 1.4, newer than the headers). */
#define VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_4_FEATURES_ID ((VkStructureType)55)

static int has_stype(const VkDeviceCreateInfo *ci, VkStructureType stype) {
  for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext)
    if (s->sType == stype)
      return 1;
  return 0;
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
  if (env && env[0] == '1' && exts_fn && exts_fn(physical_device, NULL, &n, NULL) == VK_SUCCESS &&
      n > 0 && (exts = pcache__calloc(n, sizeof *exts)) != NULL &&
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

/* The size of a struct that may stand in a device create info's chain
 * before the one that carries a feature, for copying it; 0 for a type
 * this layer does not know (then the feature is left as the program
 * asked). */
static size_t known_size(VkStructureType stype) {
  switch ((int)stype) {
#define KNOWN(type, name)                                                                          \
  case type:                                                                                       \
    return sizeof(name)
    KNOWN(VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO, VkLayerDeviceCreateInfo);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, VkPhysicalDeviceFeatures2);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, VkPhysicalDeviceVulkan11Features);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, VkPhysicalDeviceVulkan12Features);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES, VkPhysicalDeviceVulkan13Features);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES,
          VkPhysicalDevicePipelineCreationCacheControlFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_BINARY_FEATURES_KHR,
          VkPhysicalDevicePipelineBinaryFeaturesKHR);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR,
          VkPhysicalDeviceMaintenance5FeaturesKHR);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DYNAMIC_RENDERING_FEATURES,
          VkPhysicalDeviceDynamicRenderingFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SYNCHRONIZATION_2_FEATURES,
          VkPhysicalDeviceSynchronization2Features);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_FEATURES,
          VkPhysicalDeviceMaintenance4Features);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DESCRIPTOR_INDEXING_FEATURES,
          VkPhysicalDeviceDescriptorIndexingFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TIMELINE_SEMAPHORE_FEATURES,
          VkPhysicalDeviceTimelineSemaphoreFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_BUFFER_DEVICE_ADDRESS_FEATURES,
          VkPhysicalDeviceBufferDeviceAddressFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SCALAR_BLOCK_LAYOUT_FEATURES,
          VkPhysicalDeviceScalarBlockLayoutFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MULTIVIEW_FEATURES, VkPhysicalDeviceMultiviewFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_16BIT_STORAGE_FEATURES,
          VkPhysicalDevice16BitStorageFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_8BIT_STORAGE_FEATURES,
          VkPhysicalDevice8BitStorageFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_FLOAT16_INT8_FEATURES,
          VkPhysicalDeviceShaderFloat16Int8Features);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_DRAW_PARAMETERS_FEATURES,
          VkPhysicalDeviceShaderDrawParametersFeatures);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ROBUSTNESS_2_FEATURES_EXT,
          VkPhysicalDeviceRobustness2FeaturesEXT);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTENDED_DYNAMIC_STATE_FEATURES_EXT,
          VkPhysicalDeviceExtendedDynamicStateFeaturesEXT);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTENDED_DYNAMIC_STATE_2_FEATURES_EXT,
          VkPhysicalDeviceExtendedDynamicState2FeaturesEXT);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT,
          VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT);
    KNOWN(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_TRANSFORM_FEEDBACK_FEATURES_EXT,
          VkPhysicalDeviceTransformFeedbackFeaturesEXT);
    KNOWN(VK_STRUCTURE_TYPE_DEVICE_GROUP_DEVICE_CREATE_INFO, VkDeviceGroupDeviceCreateInfo);
#undef KNOWN
  default:
    return 0;
  }
}

static int ours(const layer_features *f, const void *p) {
  return (const uint8_t *)p >= (const uint8_t *)f &&
         (const uint8_t *)p < (const uint8_t *)f + sizeof *f;
}

/* The program's chain is never written (its structs may be const, even
 * read-only memory, and another thread may read them): the structs from
 * the head up to the one holding member are copied into f, linked in
 * their place, and the copy's member is returned. NULL when one of them
 * is of a type this layer cannot copy, or there is no room. */
static VkBool32 *copy_through(layer_features *f, const VkBool32 *member) {
  VkBaseOutStructure **link = (VkBaseOutStructure **)&f->ci.pNext;
  while (*link) {
    VkBaseOutStructure *s = *link;
    size_t size;
    if (ours(f, s)) {
      link = &s->pNext;
      continue;
    }
    size = known_size(s->sType);
    size = (size + 15) & ~(size_t)15;
    if (!size || f->copied + size > sizeof f->copies)
      return NULL;
    VkBaseOutStructure *copy = (VkBaseOutStructure *)(void *)(f->copies + f->copied);
    memcpy(copy, s, known_size(s->sType));
    f->copied += size;
    *link = copy;
    if ((const uint8_t *)member >= (const uint8_t *)s &&
        (const uint8_t *)member < (const uint8_t *)s + known_size(s->sType))
      return (VkBool32 *)((uint8_t *)copy + ((const uint8_t *)member - (const uint8_t *)s));
    link = &copy->pNext;
  }
  return NULL;
}

/* Turns a feature on: in a copy of the program's struct that carries it,
 * or in ours, prepended (a second struct carrying the same feature is
 * invalid beside the program's). 1, or 0 when it could not be. */
static int want(layer_features *f, VkBool32 *member, VkBaseOutStructure *ours_struct,
                VkBool32 *our_member) {
  if (member) {
    VkBool32 *copy;
    if (*member)
      return 1;
    copy = copy_through(f, member);
    if (!copy)
      return 0;
    *copy = VK_TRUE;
    return 1;
  }
  *our_member = VK_TRUE;
  ours_struct->pNext = (VkBaseOutStructure *)f->ci.pNext;
  f->ci.pNext = ours_struct;
  return 1;
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
    f->feature.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES;
    f->enabled =
        want(f, cc, (VkBaseOutStructure *)&f->feature, &f->feature.pipelineCreationCacheControl);
  }
  /* A Vulkan 1.4 features struct carries maintenance5, which this layer's
   * headers do not describe: a second struct carrying it would be invalid
   * beside it, so binaries are left out there. */
  if (can_binary && !has_stype(ci, VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_4_FEATURES_ID) &&
      !enabled_ext(ci, VK_KHR_PIPELINE_BINARY_EXTENSION_NAME) &&
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
    f->maintenance5_feature.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_5_FEATURES_KHR;
    f->binary = want(f, bin, (VkBaseOutStructure *)&f->binary_feature,
                     &f->binary_feature.pipelineBinaries) &&
                want(f, maintenance5_member(ci), (VkBaseOutStructure *)&f->maintenance5_feature,
                     &f->maintenance5_feature.maintenance5);
    if (!f->binary) { /* the extensions go back as the program listed them */
      f->ci.enabledExtensionCount = ci->enabledExtensionCount;
      f->ci.ppEnabledExtensionNames = ci->ppEnabledExtensionNames;
    }
  }
  return &f->ci;
}
