/* The wrappers: pcache_create_* / pcache_destroy_* for every object a
 * pipeline's description needs. Each calls the driver, then records what
 * the object was made from (record.c, shared with the Vulkan layer). */
#include "client/device.h"
#include "client/fastlink.h"
#include "client/record.h"

/* The driver call, then the record; a failed call records nothing, and
 * neither does pass-through, which describes no pipeline. */
#define WRAP_CREATE(Name, record, device, info, allocator, ret_handle)                             \
  do {                                                                                             \
    VkResult vr_;                                                                                  \
    if (!(device) || !(info) || !(ret_handle))                                                     \
      return VK_ERROR_INITIALIZATION_FAILED;                                                       \
    if (!(device)->core.Name)                                                                      \
      return VK_ERROR_EXTENSION_NOT_PRESENT;                                                       \
    vr_ = (device)->core.Name((device)->core.vk_device, (info), (allocator), (ret_handle));        \
    if (vr_ != VK_SUCCESS)                                                                         \
      return vr_;                                                                                  \
    if (!(device)->core.passthrough)                                                               \
      record(&(device)->core, (info), *(ret_handle));                                              \
    return VK_SUCCESS;                                                                             \
  } while (0)

/* Forgotten before the driver destroys it: the driver may reuse the value. */
#define WRAP_DESTROY(Name, type, device, handle, allocator)                                        \
  do {                                                                                             \
    if (!(device) || (handle) == VK_NULL_HANDLE)                                                   \
      return;                                                                                      \
    pcache__record_forget(&(device)->core, (type), PCACHE_HANDLE_U64(handle));                     \
    (device)->core.Name((device)->core.vk_device, (handle), (allocator));                          \
  } while (0)

PCACHE_API VkResult pcache_create_shader_module(pcache_device *device,
                                                const VkShaderModuleCreateInfo *info,
                                                const VkAllocationCallbacks *allocator,
                                                VkShaderModule *ret_module) {
  WRAP_CREATE(CreateShaderModule, pcache__record_shader_module, device, info, allocator,
              ret_module);
}

PCACHE_API void pcache_destroy_shader_module(pcache_device *device, VkShaderModule module,
                                             const VkAllocationCallbacks *allocator) {
  WRAP_DESTROY(DestroyShaderModule, PCACHE_OBJ_SHADER, device, module, allocator);
}

PCACHE_API VkResult pcache_create_descriptor_set_layout(pcache_device *device,
                                                        const VkDescriptorSetLayoutCreateInfo *info,
                                                        const VkAllocationCallbacks *allocator,
                                                        VkDescriptorSetLayout *ret_layout) {
  WRAP_CREATE(CreateDescriptorSetLayout, pcache__record_set_layout, device, info, allocator,
              ret_layout);
}

PCACHE_API void pcache_destroy_descriptor_set_layout(pcache_device *device,
                                                     VkDescriptorSetLayout layout,
                                                     const VkAllocationCallbacks *allocator) {
  WRAP_DESTROY(DestroyDescriptorSetLayout, PCACHE_OBJ_SET_LAYOUT, device, layout, allocator);
}

PCACHE_API VkResult pcache_create_pipeline_layout(pcache_device *device,
                                                  const VkPipelineLayoutCreateInfo *info,
                                                  const VkAllocationCallbacks *allocator,
                                                  VkPipelineLayout *ret_layout) {
  WRAP_CREATE(CreatePipelineLayout, pcache__record_pipeline_layout, device, info, allocator,
              ret_layout);
}

PCACHE_API void pcache_destroy_pipeline_layout(pcache_device *device, VkPipelineLayout layout,
                                               const VkAllocationCallbacks *allocator) {
  /* A background optimization may still link with it. */
  if (device)
    pcache__fastlink_forget_layout(device, layout);
  WRAP_DESTROY(DestroyPipelineLayout, PCACHE_OBJ_PIPELINE_LAYOUT, device, layout, allocator);
}

PCACHE_API VkResult pcache_create_render_pass(pcache_device *device,
                                              const VkRenderPassCreateInfo *info,
                                              const VkAllocationCallbacks *allocator,
                                              VkRenderPass *ret_render_pass) {
  WRAP_CREATE(CreateRenderPass, pcache__record_render_pass, device, info, allocator,
              ret_render_pass);
}

PCACHE_API void pcache_destroy_render_pass(pcache_device *device, VkRenderPass render_pass,
                                           const VkAllocationCallbacks *allocator) {
  WRAP_DESTROY(DestroyRenderPass, PCACHE_OBJ_RENDER_PASS, device, render_pass, allocator);
}

PCACHE_API VkResult pcache_create_render_pass2(pcache_device *device,
                                               const VkRenderPassCreateInfo2 *info,
                                               const VkAllocationCallbacks *allocator,
                                               VkRenderPass *ret_render_pass) {
  WRAP_CREATE(CreateRenderPass2, pcache__record_render_pass2, device, info, allocator,
              ret_render_pass);
}

PCACHE_API VkResult pcache_create_sampler(pcache_device *device, const VkSamplerCreateInfo *info,
                                          const VkAllocationCallbacks *allocator,
                                          VkSampler *ret_sampler) {
  WRAP_CREATE(CreateSampler, pcache__record_sampler, device, info, allocator, ret_sampler);
}

PCACHE_API void pcache_destroy_sampler(pcache_device *device, VkSampler sampler,
                                       const VkAllocationCallbacks *allocator) {
  WRAP_DESTROY(DestroySampler, PCACHE_OBJ_SAMPLER, device, sampler, allocator);
}
