/* The wrappers: pcache_create_* / pcache_destroy_* for every object a
 * pipeline's description needs. Each calls the driver, then records what
 * the object was made from in the device's object map; an object whose
 * description fails (unhashable, out of memory) still works and is simply
 * not recorded. The shader module's is written out (it also keeps the
 * code); the others are one macro each over their types. */
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

/* The describers, as CREATE_WRAPPER calls them. Set and pipeline layouts
 * name other objects, which they read from the object map under its read
 * side; render passes and samplers stand alone. */
#define DESCRIBE_WITH_LOOKUP(describe, Info)                                                       \
  static int describe##_of(pcache_device *device, const Info *info,                                \
                           pcache__desc_object **ret_desc) {                                       \
    void *token = pcache__objmap_read_begin(device->objects);                                      \
    int r = describe(info, &device->lookup, ret_desc);                                             \
    pcache__objmap_read_end(token);                                                                \
    return r;                                                                                      \
  }
#define DESCRIBE_ALONE(describe, Info)                                                             \
  static int describe##_of(pcache_device *device, const Info *info,                                \
                           pcache__desc_object **ret_desc) {                                       \
    (void)device;                                                                                  \
    return describe(info, ret_desc);                                                               \
  }
DESCRIBE_WITH_LOOKUP(pcache__desc_set_layout, VkDescriptorSetLayoutCreateInfo)
DESCRIBE_WITH_LOOKUP(pcache__desc_pipeline_layout, VkPipelineLayoutCreateInfo)
DESCRIBE_ALONE(pcache__desc_render_pass, VkRenderPassCreateInfo)
DESCRIBE_ALONE(pcache__desc_render_pass2, VkRenderPassCreateInfo2)
DESCRIBE_ALONE(pcache__desc_sampler, VkSamplerCreateInfo)

/* pcache_create_<name>: the driver's Create (VK_ERROR_EXTENSION_NOT_PRESENT
 * when the device did not load it), then the description, recorded under
 * kind when it succeeds. The same for every object but the shader module,
 * over types that differ: hence a macro. */
#define CREATE_WRAPPER(name, Info, Handle, Create, kind, describe)                                 \
  PCACHE_API VkResult pcache_create_##name(pcache_device *device, const Info *info,                \
                                           const VkAllocationCallbacks *allocator,                 \
                                           Handle *ret_handle) {                                   \
    pcache__desc_object *desc;                                                                     \
    Handle handle;                                                                                 \
    VkResult vr;                                                                                   \
    if (!device || !info || !ret_handle)                                                           \
      return VK_ERROR_INITIALIZATION_FAILED;                                                       \
    if (!device->Create)                                                                           \
      return VK_ERROR_EXTENSION_NOT_PRESENT;                                                       \
    vr = device->Create(device->vk_device, info, allocator, &handle);                              \
    if (vr != VK_SUCCESS)                                                                          \
      return vr;                                                                                   \
    if (describe(device, info, &desc) == 0)                                                        \
      pcache__objmap_put(device->objects, kind, PCACHE_HANDLE_U64(handle), desc, NULL);            \
    *ret_handle = handle;                                                                          \
    return VK_SUCCESS;                                                                             \
  }

/* pcache_destroy_<name>: forget the object, then the driver's Destroy. */
#define DESTROY_WRAPPER(name, Handle, Destroy, kind)                                               \
  PCACHE_API void pcache_destroy_##name(pcache_device *device, Handle object,                      \
                                        const VkAllocationCallbacks *allocator) {                  \
    if (!device || object == VK_NULL_HANDLE)                                                       \
      return;                                                                                      \
    pcache__objmap_remove(device->objects, kind, PCACHE_HANDLE_U64(object));                       \
    device->Destroy(device->vk_device, object, allocator);                                         \
  }

/* clang-format off */
CREATE_WRAPPER(descriptor_set_layout, VkDescriptorSetLayoutCreateInfo, VkDescriptorSetLayout,
               CreateDescriptorSetLayout, PCACHE_OBJ_SET_LAYOUT, pcache__desc_set_layout_of)
CREATE_WRAPPER(pipeline_layout, VkPipelineLayoutCreateInfo, VkPipelineLayout,
               CreatePipelineLayout, PCACHE_OBJ_PIPELINE_LAYOUT, pcache__desc_pipeline_layout_of)
CREATE_WRAPPER(render_pass, VkRenderPassCreateInfo, VkRenderPass,
               CreateRenderPass, PCACHE_OBJ_RENDER_PASS, pcache__desc_render_pass_of)
CREATE_WRAPPER(render_pass2, VkRenderPassCreateInfo2, VkRenderPass,
               CreateRenderPass2, PCACHE_OBJ_RENDER_PASS, pcache__desc_render_pass2_of)
CREATE_WRAPPER(sampler, VkSamplerCreateInfo, VkSampler,
               CreateSampler, PCACHE_OBJ_SAMPLER, pcache__desc_sampler_of)

DESTROY_WRAPPER(shader_module, VkShaderModule, DestroyShaderModule, PCACHE_OBJ_SHADER)
DESTROY_WRAPPER(descriptor_set_layout, VkDescriptorSetLayout, DestroyDescriptorSetLayout,
                PCACHE_OBJ_SET_LAYOUT)
DESTROY_WRAPPER(pipeline_layout, VkPipelineLayout, DestroyPipelineLayout,
                PCACHE_OBJ_PIPELINE_LAYOUT)
DESTROY_WRAPPER(render_pass, VkRenderPass, DestroyRenderPass, PCACHE_OBJ_RENDER_PASS)
DESTROY_WRAPPER(sampler, VkSampler, DestroySampler, PCACHE_OBJ_SAMPLER)
/* clang-format on */
