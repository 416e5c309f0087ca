/* The one change the layer makes to what a program asks of vkCreateDevice:
 * the pipelineCreationCacheControl feature, so that a pipeline the layer
 * has not built yet can be asked of the driver's own caches first, with
 * VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT (client/build.c,
 * "driver first"). The feature only allows that flag; a device with it
 * behaves as one without for every call that does not pass it.
 *
 * Only where the device's effective version (the lower of the program's
 * instance version and the device's own) is 1.3, where the feature is
 * core: enabling VK_EXT_pipeline_creation_cache_control for a program
 * that did not ask for it would add an extension to its device. */
#include <string.h>

#include "layer/layer.h"

/* The feature's member in a features struct of the program's chain, or
 * NULL when the chain has neither struct that carries it. */
static VkBool32 *find_member(const VkDeviceCreateInfo *ci) {
  for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext) {
    if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES)
      return &((VkPhysicalDeviceVulkan13Features *)s)->pipelineCreationCacheControl;
    if (s->sType == VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES)
      return &((VkPhysicalDevicePipelineCreationCacheControlFeatures *)s)
                  ->pipelineCreationCacheControl;
  }
  return NULL;
}

static int supported(const layer_instance *li, VkPhysicalDevice physical_device) {
  PFN_vkGetPhysicalDeviceProperties props_fn;
  PFN_vkGetPhysicalDeviceFeatures2 features_fn;
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceVulkan13Features f13 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                  .pNext = &f13};
  if (li->api_version < VK_API_VERSION_1_3)
    return 0;
  props_fn = (PFN_vkGetPhysicalDeviceProperties)li->next_gipa(li->instance,
                                                              "vkGetPhysicalDeviceProperties");
  features_fn =
      (PFN_vkGetPhysicalDeviceFeatures2)li->next_gipa(li->instance, "vkGetPhysicalDeviceFeatures2");
  if (!props_fn || !features_fn)
    return 0;
  props_fn(physical_device, &props);
  if (props.apiVersion < VK_API_VERSION_1_3)
    return 0;
  features_fn(physical_device, &f2);
  return f13.pipelineCreationCacheControl == VK_TRUE;
}

const VkDeviceCreateInfo *layer_features_enable(const layer_instance *li,
                                                VkPhysicalDevice physical_device,
                                                const VkDeviceCreateInfo *ci, layer_features *f) {
  VkBool32 *member = find_member(ci);
  memset(f, 0, sizeof *f);
  if (member && *member) {
    f->enabled = 1; /* the program enabled it itself */
    return ci;
  }
  if (!li || !supported(li, physical_device))
    return ci;
  f->enabled = 1;
  if (member) {
    /* The program's own features struct, set for the call and put back
     * after it: a second struct carrying the same feature is invalid
     * beside it, and the chain is the program's, not ours to copy. */
    f->flipped = member;
    *member = VK_TRUE;
    return ci;
  }
  f->feature.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES;
  f->feature.pNext = (void *)ci->pNext;
  f->feature.pipelineCreationCacheControl = VK_TRUE;
  f->ci = *ci;
  f->ci.pNext = &f->feature;
  return &f->ci;
}

void layer_features_restore(layer_features *f) {
  if (f->flipped)
    *f->flipped = VK_FALSE;
  f->flipped = NULL;
}
