/* Making what a decoded description names on a device: its libraries
 * (their objects, then their pipelines), its objects, in the order they
 * depend on each other, then the pipeline; and destroying the objects
 * again. */
#include "desc_decode.h"

#include <errno.h>

#include <pcache/pcache.h>

void pcache__desc_decoded_link(pcache__desc_decoded *d) {
  for (uint32_t i = 0; i < d->n_libraries; i++)
    pcache__desc_decoded_link(&d->libraries[i]);
  for (uint32_t i = 0; i < d->n_modules; i++)
    d->stages[i].module = d->modules[i];
  if (d->kind == 2) {
    d->compute.stage.module = d->n_modules ? d->modules[0] : VK_NULL_HANDLE;
    d->compute.layout = d->layout;
  } else {
    d->graphics.layout = d->layout;
    d->graphics.renderPass = d->render_pass;
  }
}

static int vk_error(VkResult v) {
  return v == VK_ERROR_OUT_OF_HOST_MEMORY || v == VK_ERROR_OUT_OF_DEVICE_MEMORY ? -ENOMEM : -EIO;
}

/* Whether every module, the libraries' included, has its code. */
static int have_code(const pcache__desc_decoded *d) {
  for (uint32_t i = 0; i < d->n_modules; i++)
    if (!d->module_infos[i].codeSize)
      return 0;
  for (uint32_t i = 0; i < d->n_libraries; i++)
    if (!have_code(&d->libraries[i]))
      return 0;
  return 1;
}

/* What create_objects makes, without the code check; on failure, what was
 * made is destroyed again. */
static int create_all(pcache__desc_decoded *d, VkDevice device,
                      const VkAllocationCallbacks *alloc) {
  VkResult v = VK_SUCCESS;
  int r;
  for (uint32_t i = 0; i < d->n_libraries; i++) {
    r = create_all(&d->libraries[i], device, alloc);
    if (r == 0)
      r = pcache__desc_decoded_create_pipeline(&d->libraries[i], device, VK_NULL_HANDLE, alloc,
                                               &d->library_pipelines[i]);
    if (r < 0) {
      pcache__desc_decoded_destroy_objects(d, device, alloc);
      return r;
    }
  }
  for (uint32_t i = 0; v == VK_SUCCESS && i < d->n_samplers; i++)
    v = vkCreateSampler(device, &d->sampler_infos[i], alloc, &d->samplers[i]);
  for (uint32_t i = 0; v == VK_SUCCESS && i < d->n_set_layouts; i++)
    v = vkCreateDescriptorSetLayout(device, &d->set_layout_infos[i], alloc, &d->set_layouts[i]);
  if (v == VK_SUCCESS && d->has_layout)
    v = vkCreatePipelineLayout(device, &d->layout_info, alloc, &d->layout);
  if (v == VK_SUCCESS && d->has_render_pass)
    v = vkCreateRenderPass2(device, &d->render_pass_info, alloc, &d->render_pass);
  for (uint32_t i = 0; v == VK_SUCCESS && i < d->n_modules; i++)
    if (!(d->modules_lent & (1u << i)))
      v = vkCreateShaderModule(device, &d->module_infos[i], alloc, &d->modules[i]);
  if (v != VK_SUCCESS) {
    pcache__desc_decoded_destroy_objects(d, device, alloc);
    return vk_error(v);
  }
  pcache__desc_decoded_link(d);
  return 0;
}

int pcache__desc_decoded_create_objects(pcache__desc_decoded *d, VkDevice device,
                                        const VkAllocationCallbacks *alloc) {
  if (!have_code(d))
    return PCACHE_EMISSING_MODULE;
  return create_all(d, device, alloc);
}

int pcache__desc_decoded_create_pipeline(const pcache__desc_decoded *d, VkDevice device,
                                         VkPipelineCache cache, const VkAllocationCallbacks *alloc,
                                         VkPipeline *ret_pipeline) {
  VkResult v;
  if (d->kind == 2)
    v = vkCreateComputePipelines(device, cache, 1, &d->compute, alloc, ret_pipeline);
  else
    v = vkCreateGraphicsPipelines(device, cache, 1, &d->graphics, alloc, ret_pipeline);
  return v == VK_SUCCESS ? 0 : vk_error(v);
}

void pcache__desc_decoded_destroy_objects(pcache__desc_decoded *d, VkDevice device,
                                          const VkAllocationCallbacks *alloc) {
  for (uint32_t i = 0; i < d->n_modules; i++) {
    if (d->modules_lent & (1u << i))
      continue;
    vkDestroyShaderModule(device, d->modules[i], alloc);
    d->modules[i] = VK_NULL_HANDLE;
  }
  vkDestroyRenderPass(device, d->render_pass, alloc);
  d->render_pass = VK_NULL_HANDLE;
  vkDestroyPipelineLayout(device, d->layout, alloc);
  d->layout = VK_NULL_HANDLE;
  for (uint32_t i = 0; i < d->n_set_layouts; i++) {
    vkDestroyDescriptorSetLayout(device, d->set_layouts[i], alloc);
    d->set_layouts[i] = VK_NULL_HANDLE;
  }
  for (uint32_t i = 0; i < d->n_samplers; i++) {
    vkDestroySampler(device, d->samplers[i], alloc);
    d->samplers[i] = VK_NULL_HANDLE;
  }
  /* Each library: its pipeline, then what it was made of. */
  for (uint32_t i = 0; i < d->n_libraries; i++) {
    vkDestroyPipeline(device, d->library_pipelines[i], alloc);
    d->library_pipelines[i] = VK_NULL_HANDLE;
    pcache__desc_decoded_destroy_objects(&d->libraries[i], device, alloc);
  }
  pcache__desc_decoded_link(d);
}
