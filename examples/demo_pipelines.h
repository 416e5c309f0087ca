/* What pcache-demo builds (demo_pipelines.c): the objects its pipelines
 * are made from, and variant i of the pipeline, a complete create info. */
#ifndef PCACHE_EXAMPLES_DEMO_PIPELINES_H
#define PCACHE_EXAMPLES_DEMO_PIPELINES_H

#include <pcache/pcache.h>

#include "demo_vk.h"

/* What the app builds its pipelines from: made through pcache's wrappers so
 * every pipeline can be described by content. */
typedef struct demo_objects {
  VkShaderModule vert, frag;
  VkSampler sampler;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipeline_layout;
  VkRenderPass render_pass;
} demo_objects;

/* The shader modules, sampler, layouts and render pass: through pcache's
 * wrappers on pdev, or (pdev NULL, --plain) straight to Vulkan. Nothing is
 * left made when it fails. */
VkResult demo_objects_create(pcache_device *pdev, const demo_vk *vk, demo_objects *ret_objs);
void demo_objects_destroy(pcache_device *pdev, const demo_vk *vk, demo_objects *o);

/* Everything one VkGraphicsPipelineCreateInfo points at, so a variant can be
 * filled in place and handed to pcache without dangling pointers. */
typedef struct demo_variant {
  VkPipelineShaderStageCreateInfo stages[2];
  VkSpecializationMapEntry spec_entries[2];
  uint32_t spec_data[2];
  VkSpecializationInfo spec;
  VkVertexInputBindingDescription vertex_binding;
  VkVertexInputAttributeDescription vertex_attrs[3];
  VkPipelineVertexInputStateCreateInfo vertex_input;
  VkPipelineInputAssemblyStateCreateInfo input_assembly;
  VkPipelineViewportStateCreateInfo viewport;
  VkPipelineRasterizationStateCreateInfo raster;
  VkPipelineMultisampleStateCreateInfo multisample;
  VkPipelineDepthStencilStateCreateInfo depth;
  VkPipelineColorBlendAttachmentState blend_att;
  VkPipelineColorBlendStateCreateInfo blend;
  VkDynamicState dynamic_states[2];
  VkPipelineDynamicStateCreateInfo dynamic;
  VkGraphicsPipelineCreateInfo info;
} demo_variant;

/*
 * Variant i: bit 0 blending, bit 1 topology, bit 2 cull mode, bit 3 alpha
 * test, and the rest the light count (a specialization constant), so every
 * i up to DEMO_MAX_PIPELINES is a distinct pipeline.
 */
void demo_variant_fill(demo_variant *v, const demo_objects *o, uint32_t i);

#endif
