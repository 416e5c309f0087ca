/* What pcache-demo builds: see demo_pipelines.h. */
#include "demo_pipelines.h"

#include <string.h>

#include "demo_shaders.h"

/* Through pcache's wrappers, or (pdev NULL, --plain) straight to Vulkan. */
#define OBJ_CREATE(wrapper, plain, info, ret)                                                      \
  (pdev ? wrapper(pdev, (info), NULL, (ret)) : plain(vk->device, (info), NULL, (ret)))
#define OBJ_DESTROY(wrapper, plain, handle)                                                        \
  (pdev ? wrapper(pdev, (handle), NULL) : plain(vk->device, (handle), NULL))

void demo_objects_destroy(pcache_device *pdev, const demo_vk *vk, demo_objects *o) {
  /* Each destroy accepts VK_NULL_HANDLE, as vkDestroy* does. */
  OBJ_DESTROY(pcache_destroy_render_pass, vkDestroyRenderPass, o->render_pass);
  OBJ_DESTROY(pcache_destroy_pipeline_layout, vkDestroyPipelineLayout, o->pipeline_layout);
  OBJ_DESTROY(pcache_destroy_descriptor_set_layout, vkDestroyDescriptorSetLayout, o->set_layout);
  OBJ_DESTROY(pcache_destroy_sampler, vkDestroySampler, o->sampler);
  OBJ_DESTROY(pcache_destroy_shader_module, vkDestroyShaderModule, o->frag);
  OBJ_DESTROY(pcache_destroy_shader_module, vkDestroyShaderModule, o->vert);
}

VkResult demo_objects_create(pcache_device *pdev, const demo_vk *vk, demo_objects *ret_objs) {
  demo_objects o = {0};
  VkResult vr;

  VkShaderModuleCreateInfo vsi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = sizeof demo_shaders_mesh_vert,
                                  .pCode = demo_shaders_mesh_vert};
  VkShaderModuleCreateInfo fsi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = sizeof demo_shaders_pbr_frag,
                                  .pCode = demo_shaders_pbr_frag};
  vr = OBJ_CREATE(pcache_create_shader_module, vkCreateShaderModule, &vsi, &o.vert);
  if (vr != VK_SUCCESS)
    goto out;
  vr = OBJ_CREATE(pcache_create_shader_module, vkCreateShaderModule, &fsi, &o.frag);
  if (vr != VK_SUCCESS)
    goto out;

  VkSamplerCreateInfo sci = {
      .sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
      .magFilter = VK_FILTER_LINEAR,
      .minFilter = VK_FILTER_LINEAR,
      .mipmapMode = VK_SAMPLER_MIPMAP_MODE_LINEAR,
      .addressModeU = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .addressModeV = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .addressModeW = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .maxLod = VK_LOD_CLAMP_NONE,
  };
  vr = OBJ_CREATE(pcache_create_sampler, vkCreateSampler, &sci, &o.sampler);
  if (vr != VK_SUCCESS)
    goto out;

  /* An immutable sampler is part of the layout, so of the pipeline state. */
  VkDescriptorSetLayoutBinding bindings[] = {
      {.binding = 0,
       .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
       .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT},
      {.binding = 1,
       .descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
       .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_FRAGMENT_BIT,
       .pImmutableSamplers = &o.sampler},
  };
  VkDescriptorSetLayoutCreateInfo dsl = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 2,
      .pBindings = bindings,
  };
  vr = OBJ_CREATE(pcache_create_descriptor_set_layout, vkCreateDescriptorSetLayout, &dsl,
                  &o.set_layout);
  if (vr != VK_SUCCESS)
    goto out;

  VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_VERTEX_BIT, .size = 64};
  VkPipelineLayoutCreateInfo pli = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .setLayoutCount = 1,
      .pSetLayouts = &o.set_layout,
      .pushConstantRangeCount = 1,
      .pPushConstantRanges = &push,
  };
  vr = OBJ_CREATE(pcache_create_pipeline_layout, vkCreatePipelineLayout, &pli, &o.pipeline_layout);
  if (vr != VK_SUCCESS)
    goto out;

  VkAttachmentDescription atts[] = {
      {.format = VK_FORMAT_R8G8B8A8_UNORM,
       .samples = VK_SAMPLE_COUNT_1_BIT,
       .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
       .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
       .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
       .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
       .finalLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL},
      {.format = demo_depth_format(vk->physical_device),
       .samples = VK_SAMPLE_COUNT_1_BIT,
       .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
       .storeOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
       .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
       .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
       .finalLayout = VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL},
  };
  VkAttachmentReference color_ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference depth_ref = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkSubpassDescription subpass = {
      .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
      .colorAttachmentCount = 1,
      .pColorAttachments = &color_ref,
      .pDepthStencilAttachment = &depth_ref,
  };
  VkRenderPassCreateInfo rpi = {
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
      .attachmentCount = 2,
      .pAttachments = atts,
      .subpassCount = 1,
      .pSubpasses = &subpass,
  };
  vr = OBJ_CREATE(pcache_create_render_pass, vkCreateRenderPass, &rpi, &o.render_pass);
  if (vr != VK_SUCCESS)
    goto out;

  *ret_objs = o;
  return VK_SUCCESS;

out:
  demo_objects_destroy(pdev, vk, &o);
  return vr;
}

void demo_variant_fill(demo_variant *v, const demo_objects *o, uint32_t i) {
  int blend_on = i & 1, strip = (i >> 1) & 1, cull_back = (i >> 2) & 1, alpha_test = (i >> 3) & 1;
  uint32_t lights = 1 + (i >> 4);

  memset(v, 0, sizeof *v);
  v->spec_data[0] = lights;
  v->spec_data[1] = (uint32_t)alpha_test;
  v->spec_entries[0] = (VkSpecializationMapEntry){0, 0, sizeof(uint32_t)};
  v->spec_entries[1] = (VkSpecializationMapEntry){1, sizeof(uint32_t), sizeof(uint32_t)};
  v->spec = (VkSpecializationInfo){2, v->spec_entries, sizeof v->spec_data, v->spec_data};
  v->stages[0] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_VERTEX_BIT,
      .module = o->vert,
      .pName = "main"};
  v->stages[1] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
      .module = o->frag,
      .pName = "main",
      .pSpecializationInfo = &v->spec};

  v->vertex_binding = (VkVertexInputBindingDescription){0, 32, VK_VERTEX_INPUT_RATE_VERTEX};
  v->vertex_attrs[0] = (VkVertexInputAttributeDescription){0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0};
  v->vertex_attrs[1] = (VkVertexInputAttributeDescription){1, 0, VK_FORMAT_R32G32B32_SFLOAT, 12};
  v->vertex_attrs[2] = (VkVertexInputAttributeDescription){2, 0, VK_FORMAT_R32G32_SFLOAT, 24};
  v->vertex_input = (VkPipelineVertexInputStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
      .vertexBindingDescriptionCount = 1,
      .pVertexBindingDescriptions = &v->vertex_binding,
      .vertexAttributeDescriptionCount = 3,
      .pVertexAttributeDescriptions = v->vertex_attrs};
  v->input_assembly = (VkPipelineInputAssemblyStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology =
          strip ? VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP : VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
  v->viewport = (VkPipelineViewportStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .scissorCount = 1};
  v->raster = (VkPipelineRasterizationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .polygonMode = VK_POLYGON_MODE_FILL,
      .cullMode = cull_back ? VK_CULL_MODE_BACK_BIT : VK_CULL_MODE_NONE,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1.0f};
  v->multisample = (VkPipelineMultisampleStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
  v->depth = (VkPipelineDepthStencilStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
      .depthTestEnable = VK_TRUE,
      .depthWriteEnable = blend_on ? VK_FALSE : VK_TRUE,
      .depthCompareOp = VK_COMPARE_OP_LESS_OR_EQUAL,
      .maxDepthBounds = 1.0f};
  v->blend_att = (VkPipelineColorBlendAttachmentState){
      .blendEnable = blend_on ? VK_TRUE : VK_FALSE,
      .srcColorBlendFactor = VK_BLEND_FACTOR_SRC_ALPHA,
      .dstColorBlendFactor = VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA,
      .colorBlendOp = VK_BLEND_OP_ADD,
      .srcAlphaBlendFactor = VK_BLEND_FACTOR_ONE,
      .dstAlphaBlendFactor = VK_BLEND_FACTOR_ZERO,
      .alphaBlendOp = VK_BLEND_OP_ADD,
      .colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT |
                        VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT};
  v->blend = (VkPipelineColorBlendStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &v->blend_att};
  v->dynamic_states[0] = VK_DYNAMIC_STATE_VIEWPORT;
  v->dynamic_states[1] = VK_DYNAMIC_STATE_SCISSOR;
  v->dynamic = (VkPipelineDynamicStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
      .dynamicStateCount = 2,
      .pDynamicStates = v->dynamic_states};
  v->info = (VkGraphicsPipelineCreateInfo){.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                           .stageCount = 2,
                                           .pStages = v->stages,
                                           .pVertexInputState = &v->vertex_input,
                                           .pInputAssemblyState = &v->input_assembly,
                                           .pViewportState = &v->viewport,
                                           .pRasterizationState = &v->raster,
                                           .pMultisampleState = &v->multisample,
                                           .pDepthStencilState = &v->depth,
                                           .pColorBlendState = &v->blend,
                                           .pDynamicState = &v->dynamic,
                                           .layout = o->pipeline_layout,
                                           .renderPass = o->render_pass,
                                           .subpass = 0,
                                           .basePipelineIndex = -1};
}
