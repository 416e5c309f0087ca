/* The loader's link for a layer in a create info's chain, for the pcache
 * layer and the test layers that sit below it (tests/fakedriver/): each
 * layer finds its own link the same way, so the walk is written once. */
#ifndef PCACHE_LAYER_LINK_H
#define PCACHE_LAYER_LINK_H

#include <stddef.h>
#include <vulkan/vk_layer.h>

/* The first VK_LAYER_LINK_INFO of type stype
 * (VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO or _DEVICE_CREATE_INFO)
 * in chain, or NULL. */
static inline void *layer_find_link(const void *chain, VkStructureType stype) {
  for (const VkBaseInStructure *s = chain; s; s = s->pNext) {
    /* VkLayerInstanceCreateInfo and VkLayerDeviceCreateInfo share this
     * layout: sType, pNext, then the function. */
    const VkLayerInstanceCreateInfo *link = (const VkLayerInstanceCreateInfo *)s;
    if (s->sType == stype && link->function == VK_LAYER_LINK_INFO)
      return (void *)s;
  }
  return NULL;
}

#endif
