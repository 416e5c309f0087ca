/* A fixed set of pipelines for the description tests: the objects they
 * name are described once into a table keyed by fake handles (the
 * describer never calls Vulkan), and each pipeline's create info lives in
 * one heap block so a test can place it at different addresses. */
#ifndef PCACHE_TESTS_DESC_FIXTURES_H
#define PCACHE_TESTS_DESC_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

#include "replay/desc_decode.h"

enum { FX_MODULE, FX_SET_LAYOUT, FX_PIPELINE_LAYOUT, FX_RENDER_PASS, FX_SAMPLER, FX_LIBRARY };

#define FX_MAX_OBJECTS 128

/* Fixtures FX_GPL_FIRST on use VK_EXT_graphics_pipeline_library: first
 * FX_GPL_LIBRARIES libraries (the last linked from earlier ones), then
 * pipelines linked from them. */
#define FX_GPL_FIRST 13
#define FX_GPL_LIBRARIES 7

typedef struct fx_world {
  struct {
    uint64_t handle;
    int kind;
    pcache__desc_object *object;
  } objects[FX_MAX_OBJECTS];
  int n_objects;
  uint64_t next_handle, handle_step;
  pcache__desc_lookup lookup;
  VkShaderModule vs, fs, tcs, tes, cs;
  VkSampler sampler;
  VkDescriptorSetLayout set0, set1;
  VkPipelineLayout layout, layout_full;
  VkRenderPass rp_color, rp_depth, rp_multiview, rp2_color;
  /* The library fixtures (FX_GPL_FIRST on), described and registered as
   * libraries (FX_LIBRARY) for the linked ones to name. */
  VkPipeline libraries[FX_GPL_LIBRARIES];
} fx_world;

/* Handles are handle_base, handle_base + step, ...: two worlds with other
 * bases name the same objects by other handles. */
void fx_world_init(fx_world *w, uint64_t handle_base, uint64_t step);
void fx_world_free(fx_world *w);
/* Registers an object under a new handle (owned by the world). */
uint64_t fx_world_add(fx_world *w, int kind, pcache__desc_object *object);

/* SPIR-V of the fixture shaders, by module hash: a pcache__desc_code_fn. */
int fx_code(void *ctx, const pcache__hash *hash, const uint32_t **ret_code, size_t *ret_size);
/* The shader code and size for a world module handle (for real devices). */
void fx_module_code(const fx_world *w, VkShaderModule m, const uint32_t **ret_code,
                    size_t *ret_size);

typedef struct fx_pipeline {
  void *block; /* what to free */
  int compute;
  VkGraphicsPipelineCreateInfo info;
  VkComputePipelineCreateInfo cinfo;
  VkPipelineShaderStageCreateInfo stages[4];
  VkSpecializationInfo spec;
  VkSpecializationMapEntry spec_entries[2];
  uint32_t spec_data[4];
  VkPipelineShaderStageRequiredSubgroupSizeCreateInfo subgroup;
  VkPipelineVertexInputStateCreateInfo vi;
  VkVertexInputBindingDescription vb[2];
  VkVertexInputAttributeDescription va[2];
  VkPipelineVertexInputDivisorStateCreateInfoEXT div;
  VkVertexInputBindingDivisorDescriptionEXT divs[1];
  VkPipelineInputAssemblyStateCreateInfo ia;
  VkPipelineTessellationStateCreateInfo ts;
  VkPipelineTessellationDomainOriginStateCreateInfo ts_origin;
  VkPipelineViewportStateCreateInfo vp;
  VkPipelineViewportDepthClipControlCreateInfoEXT vp_clip;
  VkViewport viewports[1];
  VkRect2D scissors[1];
  VkPipelineRasterizationStateCreateInfo rs;
  VkPipelineRasterizationConservativeStateCreateInfoEXT rs_cons;
  VkPipelineRasterizationStateStreamCreateInfoEXT rs_stream;
  VkPipelineRasterizationLineStateCreateInfoEXT rs_line;
  VkPipelineRasterizationDepthClipStateCreateInfoEXT rs_clip;
  VkPipelineRasterizationProvokingVertexStateCreateInfoEXT rs_provoking;
  VkPipelineMultisampleStateCreateInfo ms;
  VkSampleMask sample_mask[2];
  VkPipelineDepthStencilStateCreateInfo ds;
  VkPipelineColorBlendStateCreateInfo cb;
  VkPipelineColorBlendAttachmentState cba[2];
  VkPipelineColorWriteCreateInfoEXT cw;
  VkBool32 cw_enables[2];
  VkPipelineDynamicStateCreateInfo dy;
  VkDynamicState dyn[16];
  VkPipelineRenderingCreateInfo rendering;
  VkFormat color_formats[2];
  VkPipelineCreationFeedbackCreateInfo feedback;
  VkPipelineCreationFeedback feedback_pipeline, feedback_stages[4];
  VkGraphicsPipelineLibraryCreateInfoEXT parts;
  VkPipelineLibraryCreateInfoKHR link;
  VkPipeline libraries[4];
} fx_pipeline;

#define FX_COUNT 23
extern const char *const fx_names[FX_COUNT];
/* Whether lavapipe can build fixture i as it is (those from FX_GPL_FIRST
 * on need VK_EXT_graphics_pipeline_library enabled). */
int fx_replayable(int i);

/* Fixture i in a fresh heap block, pad bytes into it. */
fx_pipeline *fx_make(const fx_world *w, int i, size_t pad);
void fx_free(fx_pipeline *p);
int fx_describe(const fx_pipeline *p, const fx_world *w, pcache__desc_buf *buf,
                pcache__desc_keys *ret_keys);
/* Fixture i (made pad bytes into its block) described, as the text
 * "<state hash> <tier-1 key>" in out; its canonical bytes in *buf (the
 * caller releases them). Aborts the test on failure. */
void fx_keys_text(const fx_world *w, int i, size_t pad, char *out, size_t out_size,
                  pcache__desc_buf *buf);

/* fixtures_gpl.c: the library fixtures, from fixtures.c's base pipeline
 * (a complete one), and the world's libraries. */
void fx_fill_gpl(fx_pipeline *p, const fx_world *w, int i);
void fx_world_add_libraries(fx_world *w);
/* p described and registered as a library under a new handle. */
VkPipeline fx_world_add_library(fx_world *w, const fx_pipeline *p);
/* How many modules fixture i names, its libraries' included (which share
 * none). */
int fx_module_count(const fx_world *w, int i);

#endif
