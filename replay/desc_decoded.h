/* A decoded description: the create infos and objects a stored
 * description turns back into (desc_decode.h says what makes and frees
 * one). A header of its own, under the decoder's files: the parts'
 * decoders fill it in and desc_create.c makes its objects, while only
 * desc_decode.c, which calls the parts, declares the entry points. */
#ifndef PCACHE_REPLAY_DESC_DECODED_H
#define PCACHE_REPLAY_DESC_DECODED_H

#include "client/desc.h"

struct pcache__desc_arena; /* desc_arena.h */

/* A stored description turned back into Vulkan create infos, so an entry
 * can be rebuilt against another driver (replay). The decoder makes the
 * create infos of every object the pipeline needs; the handles start as
 * VK_NULL_HANDLE and are made by pcache__desc_decoded_create_objects (or
 * filled in by the caller, then pcache__desc_decoded_link). */

/* Gives the SPIR-V code whose XXH3-128 is hash: *ret_code must stay valid
 * until the decoded description is freed. Returns 0 or a negative code
 * (PCACHE_EMISSING_MODULE when it has none). */
typedef int (*pcache__desc_code_fn)(void *ctx, const pcache__hash *hash, const uint32_t **ret_code,
                                    size_t *ret_size);

typedef struct pcache__desc_decoded {
  uint32_t kind; /* 1 graphics, 2 compute (Pcachepb__EntryKind) */
  /* In creation order: libraries, samplers, set layouts, pipeline layout,
   * render pass, modules. Arrays have n_* entries; immutable sampler and
   * set layout pointers in the infos point into samplers[] and
   * set_layouts[]. */
  /* A graphics pipeline library, or a pipeline linked from libraries: the
   * parts it carries itself (VkGraphicsPipelineLibraryCreateInfoEXT, chained
   * when not 0), and its libraries, each decoded as a description of its
   * own (in this one's arena) and built by create_objects into
   * library_pipelines[], which the chained VkPipelineLibraryCreateInfoKHR
   * names. */
  uint32_t library_parts;
  uint32_t n_libraries;
  struct pcache__desc_decoded *libraries;
  VkPipeline *library_pipelines;
  uint32_t n_samplers;
  VkSamplerCreateInfo *sampler_infos;
  VkSampler *samplers;
  uint32_t n_set_layouts;
  VkDescriptorSetLayoutCreateInfo *set_layout_infos;
  VkDescriptorSetLayout *set_layouts;
  int has_layout; /* a library of parts without shaders may have none */
  VkPipelineLayoutCreateInfo layout_info;
  VkPipelineLayout layout;
  int has_render_pass;
  VkRenderPassCreateInfo2 render_pass_info;
  VkRenderPass render_pass;
  uint32_t n_modules; /* one per stage, in stage order */
  pcache__hash *module_hashes;
  VkShaderModuleCreateInfo *module_infos; /* codeSize 0 when code was NULL */
  VkShaderModule *modules;
  /* Bit i: modules[i] is the caller's, set before create_objects (the
   * replayer keeps modules across items): create_objects does not make
   * it, destroy_objects leaves it alone. */
  uint32_t modules_lent;
  VkPipelineShaderStageCreateInfo *stages; /* what graphics.pStages points at */
  VkGraphicsPipelineCreateInfo graphics;   /* kind 1 */
  VkComputePipelineCreateInfo compute;     /* kind 2 */
  struct pcache__desc_arena *arena;
} pcache__desc_decoded;

#endif
