/* The objects a pipeline's description names, intercepted at creation: the
 * driver makes the object, then the client core records what it was made
 * from (record.c, the same code libpcache's wrappers run). Destruction
 * forgets the handle before the driver frees it, since the driver may hand
 * the same value to the next object; pipeline libraries, which the core
 * records as it builds them, are forgotten the same way. */
#include <string.h>

#include "client/record.h"
#include "layer/layer.h"

static layer_device *device_of(VkDevice device) { return layer_registry_device(layer_key(device)); }

/* Create through the next layer, then record. A device the layer does not
 * know (it could not allocate its record) never reaches these: the
 * dispatch returns the next layer's functions for it. */
#define LAYER_CREATE(Name, record, Info, Handle)                                                   \
  static VKAPI_ATTR VkResult VKAPI_CALL layer_##Name(VkDevice device, const Info *info,            \
                                                     const VkAllocationCallbacks *allocator,       \
                                                     Handle *ret_handle) {                         \
    layer_device *ld = device_of(device);                                                          \
    VkResult vr = ld->Name(device, info, allocator, ret_handle);                                   \
    if (vr == VK_SUCCESS && ld->pc)                                                                \
      record(&ld->pc->core, info, *ret_handle);                                                    \
    return vr;                                                                                     \
  }

#define LAYER_DESTROY(Name, type, Handle)                                                          \
  static VKAPI_ATTR void VKAPI_CALL layer_##Name(VkDevice device, Handle handle,                   \
                                                 const VkAllocationCallbacks *allocator) {         \
    layer_device *ld = device_of(device);                                                          \
    if (handle != VK_NULL_HANDLE && ld->pc)                                                        \
      pcache__record_forget(&ld->pc->core, (type), PCACHE_HANDLE_U64(handle));                     \
    ld->Name(device, handle, allocator);                                                           \
  }

LAYER_CREATE(CreateShaderModule, pcache__record_shader_module, VkShaderModuleCreateInfo,
             VkShaderModule)
LAYER_DESTROY(DestroyShaderModule, PCACHE_OBJ_SHADER, VkShaderModule)
LAYER_CREATE(CreateSampler, pcache__record_sampler, VkSamplerCreateInfo, VkSampler)
LAYER_DESTROY(DestroySampler, PCACHE_OBJ_SAMPLER, VkSampler)
LAYER_CREATE(CreateDescriptorSetLayout, pcache__record_set_layout, VkDescriptorSetLayoutCreateInfo,
             VkDescriptorSetLayout)
LAYER_DESTROY(DestroyDescriptorSetLayout, PCACHE_OBJ_SET_LAYOUT, VkDescriptorSetLayout)
LAYER_CREATE(CreatePipelineLayout, pcache__record_pipeline_layout, VkPipelineLayoutCreateInfo,
             VkPipelineLayout)
LAYER_DESTROY(DestroyPipelineLayout, PCACHE_OBJ_PIPELINE_LAYOUT, VkPipelineLayout)
LAYER_CREATE(CreateRenderPass, pcache__record_render_pass, VkRenderPassCreateInfo, VkRenderPass)
LAYER_CREATE(CreateRenderPass2, pcache__record_render_pass2, VkRenderPassCreateInfo2, VkRenderPass)
LAYER_CREATE(CreateRenderPass2KHR, pcache__record_render_pass2, VkRenderPassCreateInfo2,
             VkRenderPass)
LAYER_DESTROY(DestroyRenderPass, PCACHE_OBJ_RENDER_PASS, VkRenderPass)
/* Pipeline libraries are recorded by the client core as it builds them
 * (build.c); any pipeline's destruction forgets its handle, which for a
 * pipeline that is no library is a lookup that finds nothing. */
LAYER_DESTROY(DestroyPipeline, PCACHE_OBJ_PIPELINE_LIBRARY, VkPipeline)

PFN_vkVoidFunction layer_objects_proc(const char *name) {
  static const layer_proc table[] = {
      LAYER_PROC(CreateShaderModule),
      LAYER_PROC(DestroyShaderModule),
      LAYER_PROC(CreateSampler),
      LAYER_PROC(DestroySampler),
      LAYER_PROC(CreateDescriptorSetLayout),
      LAYER_PROC(DestroyDescriptorSetLayout),
      LAYER_PROC(CreatePipelineLayout),
      LAYER_PROC(DestroyPipelineLayout),
      LAYER_PROC(CreateRenderPass),
      LAYER_PROC(CreateRenderPass2),
      LAYER_PROC(CreateRenderPass2KHR),
      LAYER_PROC(DestroyRenderPass),
      LAYER_PROC(DestroyPipeline),
  };
  return layer_find_proc(table, sizeof table / sizeof table[0], name);
}
