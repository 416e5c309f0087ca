/* Recording objects by content: see record.h. Objects whose description
 * names other objects (set layouts name immutable samplers, pipeline
 * layouts name set layouts) are described inside a read section of the
 * map, which is where the describer looks those up. */
#include "client/record.h"

typedef int (*describe_fn)(const void *info, const pcache__desc_lookup *lookup,
                           pcache__desc_object **ret_object);

static void record_looked_up(pcache__core *d, uint32_t type, uint64_t handle, const void *info,
                             describe_fn describe) {
  pcache__desc_object *desc;
  void *token = pcache__objmap_read_begin(d->objects);
  int r = describe(info, &d->lookup, &desc);
  pcache__objmap_read_end(token);
  if (r == 0)
    pcache__objmap_put(d->objects, type, handle, desc, NULL);
}

static int describe_set_layout(const void *info, const pcache__desc_lookup *lookup,
                               pcache__desc_object **ret_object) {
  return pcache__desc_set_layout(info, lookup, ret_object);
}

static int describe_pipeline_layout(const void *info, const pcache__desc_lookup *lookup,
                                    pcache__desc_object **ret_object) {
  return pcache__desc_pipeline_layout(info, lookup, ret_object);
}

void pcache__record_shader_module(pcache__core *d, const VkShaderModuleCreateInfo *info,
                                  VkShaderModule handle) {
  pcache__desc_object *desc;
  pcache__module *module;
  if (pcache__desc_shader_module(info, &desc) != 0)
    return;
  /* The code is kept for uploads: Put items carry the code of modules the
   * daemon may lack, and the app may destroy the module first. */
  module = pcache__module_new(&desc->hash, info->pCode, info->codeSize);
  if (!module) {
    pcache__desc_object_free(desc);
    return;
  }
  pcache__objmap_put(d->objects, PCACHE_OBJ_SHADER, PCACHE_HANDLE_U64(handle), desc, module);
}

void pcache__record_set_layout(pcache__core *d, const VkDescriptorSetLayoutCreateInfo *info,
                               VkDescriptorSetLayout handle) {
  record_looked_up(d, PCACHE_OBJ_SET_LAYOUT, PCACHE_HANDLE_U64(handle), info, describe_set_layout);
}

void pcache__record_pipeline_layout(pcache__core *d, const VkPipelineLayoutCreateInfo *info,
                                    VkPipelineLayout handle) {
  record_looked_up(d, PCACHE_OBJ_PIPELINE_LAYOUT, PCACHE_HANDLE_U64(handle), info,
                   describe_pipeline_layout);
}

void pcache__record_render_pass(pcache__core *d, const VkRenderPassCreateInfo *info,
                                VkRenderPass handle) {
  pcache__desc_object *desc;
  if (pcache__desc_render_pass(info, &desc) == 0)
    pcache__objmap_put(d->objects, PCACHE_OBJ_RENDER_PASS, PCACHE_HANDLE_U64(handle), desc, NULL);
}

void pcache__record_render_pass2(pcache__core *d, const VkRenderPassCreateInfo2 *info,
                                 VkRenderPass handle) {
  pcache__desc_object *desc;
  if (pcache__desc_render_pass2(info, &desc) == 0)
    pcache__objmap_put(d->objects, PCACHE_OBJ_RENDER_PASS, PCACHE_HANDLE_U64(handle), desc, NULL);
}

void pcache__record_sampler(pcache__core *d, const VkSamplerCreateInfo *info, VkSampler handle) {
  pcache__desc_object *desc;
  if (pcache__desc_sampler(info, &desc) == 0)
    pcache__objmap_put(d->objects, PCACHE_OBJ_SAMPLER, PCACHE_HANDLE_U64(handle), desc, NULL);
}

void pcache__record_pipeline_library(pcache__core *d, const pcache__desc_buf *desc,
                                     const pcache__desc_keys *keys, VkPipeline handle) {
  pcache__desc_object *object;
  if (pcache__desc_pipeline_library(desc, keys, &object) == 0)
    pcache__objmap_put(d->objects, PCACHE_OBJ_PIPELINE_LIBRARY, PCACHE_HANDLE_U64(handle), object,
                       NULL);
}
