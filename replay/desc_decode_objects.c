/* The decoder's objects: the samplers, set layouts and pipeline layout a
 * description embeds, its render pass (as a render pass 2, which takes
 * everything a render pass 1 does), and its shader stages with their
 * modules' code. */
#include "desc_decode_objects.h"

#include <string.h>

#include <pcache/pcache.h>

#include "proto/desc_check.h"

static int decode_sampler(struct pcache__desc_arena *a, const Pcachepb__SamplerDesc *s,
                          VkSamplerCreateInfo *ret) {
  const void *next = NULL;
  *ret = (VkSamplerCreateInfo){
      .sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
      .flags = s->flags,
      .magFilter = s->mag_filter,
      .minFilter = s->min_filter,
      .mipmapMode = s->mipmap_mode,
      .addressModeU = s->address_mode_u,
      .addressModeV = s->address_mode_v,
      .addressModeW = s->address_mode_w,
      .mipLodBias = s->mip_lod_bias,
      .anisotropyEnable = s->anisotropy_enable,
      .maxAnisotropy = s->max_anisotropy,
      .compareEnable = s->compare_enable,
      .compareOp = s->compare_op,
      .minLod = s->min_lod,
      .maxLod = s->max_lod,
      .borderColor = s->border_color,
      .unnormalizedCoordinates = s->unnormalized_coordinates,
  };
  if (s->custom_border_color.len) {
    VkSamplerCustomBorderColorCreateInfoEXT *b;
    if (s->custom_border_color.len != sizeof(b->customBorderColor))
      return PCACHE_EBAD_DESC;
    ALLOC(a, b, 1);
    b->sType = VK_STRUCTURE_TYPE_SAMPLER_CUSTOM_BORDER_COLOR_CREATE_INFO_EXT;
    b->pNext = next;
    memcpy(&b->customBorderColor, s->custom_border_color.data, sizeof(b->customBorderColor));
    b->format = s->custom_border_format;
    next = b;
  }
  if (s->reduction_mode) {
    VkSamplerReductionModeCreateInfo *m;
    ALLOC(a, m, 1);
    m->sType = VK_STRUCTURE_TYPE_SAMPLER_REDUCTION_MODE_CREATE_INFO;
    m->pNext = next;
    m->reductionMode = s->reduction_mode;
    next = m;
  }
  ret->pNext = next;
  return 0;
}

int pcache__desc_decode_layout(struct pcache__desc_arena *a, const Pcachepb__PipelineLayoutDesc *l,
                               pcache__desc_decoded *d) {
  uint32_t n_samplers = 0, si = 0;
  int r;
  d->layout_info.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
  if (!l)
    return 0;
  for (size_t i = 0; i < l->n_set_layouts; i++)
    for (size_t j = 0; j < l->set_layouts[i]->n_bindings; j++) {
      const Pcachepb__SetLayoutBindingDesc *b = l->set_layouts[i]->bindings[j];
      if (b->n_immutable_samplers && b->n_immutable_samplers != b->descriptor_count)
        return PCACHE_EBAD_DESC;
      n_samplers += (uint32_t)b->n_immutable_samplers;
    }
  ALLOC(a, d->sampler_infos, n_samplers);
  ALLOC(a, d->samplers, n_samplers);
  d->n_samplers = n_samplers;
  ALLOC(a, d->set_layout_infos, l->n_set_layouts);
  ALLOC(a, d->set_layouts, l->n_set_layouts);
  d->n_set_layouts = (uint32_t)l->n_set_layouts;
  for (size_t i = 0; i < l->n_set_layouts; i++) {
    const Pcachepb__SetLayoutDesc *sl = l->set_layouts[i];
    VkDescriptorSetLayoutCreateInfo *info = &d->set_layout_infos[i];
    VkDescriptorSetLayoutBinding *bindings;
    VkDescriptorBindingFlags *flags;
    int any_flags = 0;
    ALLOC(a, bindings, sl->n_bindings);
    ALLOC(a, flags, sl->n_bindings);
    for (size_t j = 0; j < sl->n_bindings; j++) {
      const Pcachepb__SetLayoutBindingDesc *b = sl->bindings[j];
      bindings[j] = (VkDescriptorSetLayoutBinding){
          .binding = b->binding,
          .descriptorType = b->descriptor_type,
          .descriptorCount = b->descriptor_count,
          .stageFlags = b->stage_flags,
      };
      if (b->n_immutable_samplers) {
        bindings[j].pImmutableSamplers = &d->samplers[si];
        for (size_t k = 0; k < b->n_immutable_samplers; k++) {
          r = decode_sampler(a, b->immutable_samplers[k], &d->sampler_infos[si++]);
          if (r < 0)
            return r;
        }
      }
      flags[j] = b->binding_flags;
      any_flags |= b->binding_flags != 0;
    }
    *info = (VkDescriptorSetLayoutCreateInfo){
        .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
        .flags = sl->flags,
        .bindingCount = (uint32_t)sl->n_bindings,
        .pBindings = bindings,
    };
    if (any_flags) {
      VkDescriptorSetLayoutBindingFlagsCreateInfo *f;
      ALLOC(a, f, 1);
      f->sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO;
      f->bindingCount = (uint32_t)sl->n_bindings;
      f->pBindingFlags = flags;
      info->pNext = f;
    }
  }
  d->layout_info.flags = l->flags;
  d->layout_info.setLayoutCount = (uint32_t)l->n_set_layouts;
  d->layout_info.pSetLayouts = d->set_layouts;
  if (l->n_push_constant_ranges) {
    VkPushConstantRange *p;
    ALLOC(a, p, l->n_push_constant_ranges);
    for (size_t i = 0; i < l->n_push_constant_ranges; i++)
      p[i] = (VkPushConstantRange){l->push_constant_ranges[i]->stage_flags,
                                   l->push_constant_ranges[i]->offset,
                                   l->push_constant_ranges[i]->size};
    d->layout_info.pushConstantRangeCount = (uint32_t)l->n_push_constant_ranges;
    d->layout_info.pPushConstantRanges = p;
  }
  return 0;
}

static int decode_refs(struct pcache__desc_arena *a, Pcachepb__AttachmentRefDesc *const *refs,
                       size_t n, uint32_t n_attachments, int input, VkAttachmentReference2 **ret) {
  VkAttachmentReference2 *out;
  ALLOC(a, out, n);
  for (size_t i = 0; i < n; i++) {
    uint32_t att = refs[i]->attachment;
    if (att != VK_ATTACHMENT_UNUSED && att >= n_attachments)
      return PCACHE_EBAD_DESC;
    out[i] = (VkAttachmentReference2){
        .sType = VK_STRUCTURE_TYPE_ATTACHMENT_REFERENCE_2,
        .attachment = att,
        .layout = att == VK_ATTACHMENT_UNUSED ? VK_IMAGE_LAYOUT_UNDEFINED : VK_IMAGE_LAYOUT_GENERAL,
        .aspectMask = input ? refs[i]->aspect_mask : 0,
    };
  }
  *ret = out;
  return 0;
}

/* Load/store ops and layouts are not part of compatibility: the neutral
 * choices below make a render pass compatible with the original. */
int pcache__desc_decode_render_pass(struct pcache__desc_arena *a,
                                    const Pcachepb__RenderPassDesc *rp,
                                    VkRenderPassCreateInfo2 *ret) {
  VkAttachmentDescription2 *atts;
  VkSubpassDescription2 *subs;
  VkSubpassDependency2 *deps;
  uint32_t n_att = (uint32_t)rp->n_attachments;
  int r;
  ALLOC(a, atts, rp->n_attachments);
  ALLOC(a, subs, rp->n_subpasses);
  ALLOC(a, deps, rp->n_dependencies);
  for (size_t i = 0; i < rp->n_attachments; i++)
    atts[i] = (VkAttachmentDescription2){
        .sType = VK_STRUCTURE_TYPE_ATTACHMENT_DESCRIPTION_2,
        .flags = rp->attachments[i]->flags,
        .format = rp->attachments[i]->format,
        .samples = rp->attachments[i]->samples,
        .loadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        .storeOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
        .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
        .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
        .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
        .finalLayout = VK_IMAGE_LAYOUT_GENERAL,
    };
  for (size_t i = 0; i < rp->n_subpasses; i++) {
    const Pcachepb__SubpassDesc *s = rp->subpasses[i];
    VkAttachmentReference2 *in, *color, *resolve, *depth = NULL;
    if (s->n_resolve_attachments && s->n_resolve_attachments != s->n_color_attachments)
      return PCACHE_EBAD_DESC;
    if ((r = decode_refs(a, s->input_attachments, s->n_input_attachments, n_att, 1, &in)) < 0 ||
        (r = decode_refs(a, s->color_attachments, s->n_color_attachments, n_att, 0, &color)) < 0 ||
        (r = decode_refs(a, s->resolve_attachments, s->n_resolve_attachments, n_att, 0, &resolve)) <
            0)
      return r;
    if (s->depth_stencil_attachment &&
        (r = decode_refs(a, &s->depth_stencil_attachment, 1, n_att, 0, &depth)) < 0)
      return r;
    subs[i] = (VkSubpassDescription2){
        .sType = VK_STRUCTURE_TYPE_SUBPASS_DESCRIPTION_2,
        .flags = s->flags,
        .pipelineBindPoint = s->bind_point,
        .viewMask = s->view_mask,
        .inputAttachmentCount = (uint32_t)s->n_input_attachments,
        .pInputAttachments = in,
        .colorAttachmentCount = (uint32_t)s->n_color_attachments,
        .pColorAttachments = color,
        .pResolveAttachments = resolve,
        .pDepthStencilAttachment = depth,
    };
  }
  for (size_t i = 0; i < rp->n_dependencies; i++) {
    const Pcachepb__SubpassDependencyDesc *dep = rp->dependencies[i];
    deps[i] = (VkSubpassDependency2){
        .sType = VK_STRUCTURE_TYPE_SUBPASS_DEPENDENCY_2,
        .srcSubpass = dep->src_subpass,
        .dstSubpass = dep->dst_subpass,
        .srcStageMask = dep->src_stage_mask,
        .dstStageMask = dep->dst_stage_mask,
        .srcAccessMask = dep->src_access_mask,
        .dstAccessMask = dep->dst_access_mask,
        .dependencyFlags = dep->dependency_flags,
        .viewOffset = dep->view_offset,
    };
  }
  *ret = (VkRenderPassCreateInfo2){
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO_2,
      .flags = rp->flags,
      .attachmentCount = n_att,
      .pAttachments = atts,
      .subpassCount = (uint32_t)rp->n_subpasses,
      .pSubpasses = subs,
      .dependencyCount = (uint32_t)rp->n_dependencies,
      .pDependencies = deps,
      .correlatedViewMaskCount = (uint32_t)rp->n_correlated_view_masks,
      .pCorrelatedViewMasks = rp->correlated_view_masks,
  };
  return 0;
}

int pcache__desc_decode_stages(struct pcache__desc_arena *a, const Pcachepb__PipelineDesc *m,
                               pcache__desc_code_fn code, void *code_ctx, pcache__desc_decoded *d) {
  int r;
  if (m->n_stages > PCACHE_DESC_MAX_MODULES)
    return PCACHE_EBAD_DESC;
  ALLOC(a, d->stages, m->n_stages);
  ALLOC(a, d->module_hashes, m->n_stages);
  ALLOC(a, d->module_infos, m->n_stages);
  ALLOC(a, d->modules, m->n_stages);
  d->n_modules = (uint32_t)m->n_stages;
  for (size_t i = 0; i < m->n_stages; i++) {
    const Pcachepb__ShaderStageDesc *s = m->stages[i];
    VkPipelineShaderStageCreateInfo *st = &d->stages[i];
    if (!s->module || s->module->spirv_hash.len != PCACHE_HASH_SIZE)
      return PCACHE_EBAD_DESC;
    memcpy(d->module_hashes[i].bytes, s->module->spirv_hash.data, PCACHE_HASH_SIZE);
    d->module_infos[i].sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    if (code) {
      const uint32_t *words;
      size_t size;
      r = code(code_ctx, &d->module_hashes[i], &words, &size);
      if (r < 0)
        return r;
      d->module_infos[i].pCode = words;
      d->module_infos[i].codeSize = size;
    }
    *st = (VkPipelineShaderStageCreateInfo){
        .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
        .flags = s->flags,
        .stage = s->stage,
        .pName = s->entry_point,
    };
    if (s->n_specialization) {
      VkSpecializationInfo *spec;
      VkSpecializationMapEntry *entries;
      uint8_t *data;
      size_t total = 0;
      for (size_t j = 0; j < s->n_specialization; j++)
        total += s->specialization[j]->data.len; /* bounded by the message size */
      ALLOC(a, spec, 1);
      ALLOC(a, entries, s->n_specialization);
      ALLOC(a, data, total);
      total = 0;
      for (size_t j = 0; j < s->n_specialization; j++) {
        const ProtobufCBinaryData *b = &s->specialization[j]->data;
        entries[j] =
            (VkSpecializationMapEntry){s->specialization[j]->constant_id, (uint32_t)total, b->len};
        if (b->len)
          memcpy(data + total, b->data, b->len);
        total += b->len;
      }
      *spec = (VkSpecializationInfo){(uint32_t)s->n_specialization, entries, total, data};
      st->pSpecializationInfo = spec;
    }
    if (s->required_subgroup_size) {
      VkPipelineShaderStageRequiredSubgroupSizeCreateInfo *sg;
      ALLOC(a, sg, 1);
      sg->sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO;
      sg->requiredSubgroupSize = s->required_subgroup_size;
      st->pNext = sg;
    }
  }
  return 0;
}
