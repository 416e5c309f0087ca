/* The wrappers: pcache_create_* / pcache_destroy_* for every object a
 * pipeline's description needs. Each calls the driver, then records what
 * the object was made from in the device's object map; an object whose
 * description fails (unhashable, out of memory) still works and is simply
 * not recorded. */
#include "client/device.h"

PCACHE_API VkResult pcache_create_shader_module(pcache_device *device,
                                                const VkShaderModuleCreateInfo *info,
                                                const VkAllocationCallbacks *allocator,
                                                VkShaderModule *ret_module) {
  pcache__desc_object *desc;
  pcache__module *module;
  VkShaderModule handle;
  VkResult vr;
  if (!device || !info || !ret_module)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateShaderModule(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  /* Unhashable (or out of memory): the module works, it is just not
   * recorded, and pipelines using it are built without a state hash. */
  if (pcache__desc_shader_module(info, &desc) == 0) {
    module = pcache__module_new(&desc->hash, info->pCode, info->codeSize);
    if (module)
      pcache__objmap_put(device->objects, PCACHE_OBJ_SHADER, PCACHE_HANDLE_U64(handle), desc,
                         module);
    else
      pcache__desc_object_free(desc);
  }
  *ret_module = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_shader_module(pcache_device *device, VkShaderModule module,
                                             const VkAllocationCallbacks *allocator) {
  if (!device || module == VK_NULL_HANDLE)
    return;
  pcache__objmap_remove(device->objects, PCACHE_OBJ_SHADER, PCACHE_HANDLE_U64(module));
  device->DestroyShaderModule(device->vk_device, module, allocator);
}

PCACHE_API VkResult pcache_create_descriptor_set_layout(pcache_device *device,
                                                        const VkDescriptorSetLayoutCreateInfo *info,
                                                        const VkAllocationCallbacks *allocator,
                                                        VkDescriptorSetLayout *ret_layout) {
  pcache__desc_object *desc;
  VkDescriptorSetLayout handle;
  VkResult vr;
  void *token;
  int r;
  if (!device || !info || !ret_layout)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateDescriptorSetLayout(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  token = pcache__objmap_read_begin(device->objects);
  r = pcache__desc_set_layout(info, &device->lookup, &desc);
  pcache__objmap_read_end(token);
  if (r == 0)
    pcache__objmap_put(device->objects, PCACHE_OBJ_SET_LAYOUT, PCACHE_HANDLE_U64(handle), desc,
                       NULL);
  *ret_layout = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_descriptor_set_layout(pcache_device *device,
                                                     VkDescriptorSetLayout layout,
                                                     const VkAllocationCallbacks *allocator) {
  if (!device || layout == VK_NULL_HANDLE)
    return;
  pcache__objmap_remove(device->objects, PCACHE_OBJ_SET_LAYOUT, PCACHE_HANDLE_U64(layout));
  device->DestroyDescriptorSetLayout(device->vk_device, layout, allocator);
}

PCACHE_API VkResult pcache_create_pipeline_layout(pcache_device *device,
                                                  const VkPipelineLayoutCreateInfo *info,
                                                  const VkAllocationCallbacks *allocator,
                                                  VkPipelineLayout *ret_layout) {
  pcache__desc_object *desc;
  VkPipelineLayout handle;
  VkResult vr;
  void *token;
  int r;
  if (!device || !info || !ret_layout)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreatePipelineLayout(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  token = pcache__objmap_read_begin(device->objects);
  r = pcache__desc_pipeline_layout(info, &device->lookup, &desc);
  pcache__objmap_read_end(token);
  if (r == 0)
    pcache__objmap_put(device->objects, PCACHE_OBJ_PIPELINE_LAYOUT, PCACHE_HANDLE_U64(handle), desc,
                       NULL);
  *ret_layout = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_pipeline_layout(pcache_device *device, VkPipelineLayout layout,
                                               const VkAllocationCallbacks *allocator) {
  if (!device || layout == VK_NULL_HANDLE)
    return;
  pcache__objmap_remove(device->objects, PCACHE_OBJ_PIPELINE_LAYOUT, PCACHE_HANDLE_U64(layout));
  device->DestroyPipelineLayout(device->vk_device, layout, allocator);
}

PCACHE_API VkResult pcache_create_render_pass(pcache_device *device,
                                              const VkRenderPassCreateInfo *info,
                                              const VkAllocationCallbacks *allocator,
                                              VkRenderPass *ret_render_pass) {
  pcache__desc_object *desc;
  VkRenderPass handle;
  VkResult vr;
  if (!device || !info || !ret_render_pass)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateRenderPass(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  if (pcache__desc_render_pass(info, &desc) == 0)
    pcache__objmap_put(device->objects, PCACHE_OBJ_RENDER_PASS, PCACHE_HANDLE_U64(handle), desc,
                       NULL);
  *ret_render_pass = handle;
  return VK_SUCCESS;
}

PCACHE_API VkResult pcache_create_render_pass2(pcache_device *device,
                                               const VkRenderPassCreateInfo2 *info,
                                               const VkAllocationCallbacks *allocator,
                                               VkRenderPass *ret_render_pass) {
  pcache__desc_object *desc;
  VkRenderPass handle;
  VkResult vr;
  if (!device || !info || !ret_render_pass)
    return VK_ERROR_INITIALIZATION_FAILED;
  if (!device->CreateRenderPass2)
    return VK_ERROR_EXTENSION_NOT_PRESENT;
  vr = device->CreateRenderPass2(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  if (pcache__desc_render_pass2(info, &desc) == 0)
    pcache__objmap_put(device->objects, PCACHE_OBJ_RENDER_PASS, PCACHE_HANDLE_U64(handle), desc,
                       NULL);
  *ret_render_pass = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_render_pass(pcache_device *device, VkRenderPass render_pass,
                                           const VkAllocationCallbacks *allocator) {
  if (!device || render_pass == VK_NULL_HANDLE)
    return;
  pcache__objmap_remove(device->objects, PCACHE_OBJ_RENDER_PASS, PCACHE_HANDLE_U64(render_pass));
  device->DestroyRenderPass(device->vk_device, render_pass, allocator);
}

PCACHE_API VkResult pcache_create_sampler(pcache_device *device, const VkSamplerCreateInfo *info,
                                          const VkAllocationCallbacks *allocator,
                                          VkSampler *ret_sampler) {
  pcache__desc_object *desc;
  VkSampler handle;
  VkResult vr;
  if (!device || !info || !ret_sampler)
    return VK_ERROR_INITIALIZATION_FAILED;
  vr = device->CreateSampler(device->vk_device, info, allocator, &handle);
  if (vr != VK_SUCCESS)
    return vr;
  if (pcache__desc_sampler(info, &desc) == 0)
    pcache__objmap_put(device->objects, PCACHE_OBJ_SAMPLER, PCACHE_HANDLE_U64(handle), desc, NULL);
  *ret_sampler = handle;
  return VK_SUCCESS;
}

PCACHE_API void pcache_destroy_sampler(pcache_device *device, VkSampler sampler,
                                       const VkAllocationCallbacks *allocator) {
  if (!device || sampler == VK_NULL_HANDLE)
    return;
  pcache__objmap_remove(device->objects, PCACHE_OBJ_SAMPLER, PCACHE_HANDLE_U64(sampler));
  device->DestroySampler(device->vk_device, sampler, allocator);
}
