/* The describer's objects: the encodings of shader modules, samplers, set
 * layouts, pipeline layouts and render passes (1 and 2, which describe
 * alike), made once when the app creates the object through a wrapper and
 * embedded in every pipeline description that names it; and graphics
 * pipeline libraries, whose object is their own description. */
#include "desc_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"

void pcache__desc_object_free(pcache__desc_object *object) { pcache__free(object); }

/* One allocation holds the object and its bytes; its hash is hash, or
 * that of the bytes. */
static int object_copy(const uint8_t *data, size_t size, const pcache__hash *hash,
                       pcache__desc_object **ret_object) {
  pcache__desc_object *o = pcache__malloc(sizeof(*o) + size + 1);
  if (!o)
    return -ENOMEM;
  o->encoded = (uint8_t *)(o + 1);
  o->encoded_size = size;
  memcpy(o->encoded, data, size);
  if (hash)
    o->hash = *hash;
  else
    pcache__hash128(o->encoded, o->encoded_size, &o->hash);
  *ret_object = o;
  return 0;
}

static int object_make(const pcache__desc_writer *w, const pcache__hash *hash,
                       pcache__desc_object **ret_object) {
  if (w->err)
    return w->err;
  return object_copy(w->buf->data, w->buf->size, hash, ret_object);
}

int pcache__desc_shader_module(const VkShaderModuleCreateInfo *info,
                               pcache__desc_object **ret_object) {
  pcache__desc_buf buf;
  pcache__desc_writer w = {&buf, 0};
  pcache__hash h;
  int r;
  /* Every known extension of VkShaderModuleCreateInfo (validation caches)
   * leaves the code alone, but none is known yet: be strict. */
  if (info->pNext)
    return PCACHE_EUNHASHABLE;
  pcache__desc_buf_init(&buf);
  pcache__hash128(info->pCode, info->codeSize, &h);
  put_bytes(&w, 1, h.bytes, sizeof(h.bytes));
  r = object_make(&w, &h, ret_object);
  pcache__desc_buf_release(&buf);
  return r;
}

#define BORDER_CUSTOM_FLOAT 1000287003
#define BORDER_CUSTOM_INT 1000287004

static void encode_sampler(pcache__desc_writer *w, const VkSamplerCreateInfo *info,
                           const VkSamplerReductionModeCreateInfo *reduction,
                           const VkSamplerCustomBorderColorCreateInfoEXT *border) {
  int custom = info->borderColor == BORDER_CUSTOM_FLOAT || info->borderColor == BORDER_CUSTOM_INT;
  put_u32(w, 1, info->flags);
  put_u32(w, 2, info->magFilter);
  put_u32(w, 3, info->minFilter);
  put_u32(w, 4, info->mipmapMode);
  put_u32(w, 5, info->addressModeU);
  put_u32(w, 6, info->addressModeV);
  put_u32(w, 7, info->addressModeW);
  put_float(w, 8, info->mipLodBias);
  put_bool(w, 9, info->anisotropyEnable);
  if (info->anisotropyEnable)
    put_float(w, 10, info->maxAnisotropy);
  put_bool(w, 11, info->compareEnable);
  if (info->compareEnable)
    put_u32(w, 12, info->compareOp);
  put_float(w, 13, info->minLod);
  put_float(w, 14, info->maxLod);
  put_u32(w, 15, info->borderColor);
  put_bool(w, 16, info->unnormalizedCoordinates);
  if (reduction)
    put_u32(w, 17, reduction->reductionMode);
  if (custom && border) {
    put_bytes(w, 18, &border->customBorderColor, sizeof(border->customBorderColor));
    put_u32(w, 19, border->format);
  }
}

int pcache__desc_sampler(const VkSamplerCreateInfo *info, pcache__desc_object **ret_object) {
  const VkSamplerReductionModeCreateInfo *reduction = NULL;
  const VkSamplerCustomBorderColorCreateInfoEXT *border = NULL;
  pcache__desc_buf buf;
  pcache__desc_writer w = {&buf, 0};
  int r;
  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext) {
    switch (s->sType) {
    case VK_STRUCTURE_TYPE_SAMPLER_REDUCTION_MODE_CREATE_INFO:
      reduction = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_SAMPLER_CUSTOM_BORDER_COLOR_CREATE_INFO_EXT:
      border = (const void *)s;
      break;
    default: /* VkSamplerYcbcrConversionInfo among them: a handle we cannot describe */
      return PCACHE_EUNHASHABLE;
    }
  }
  pcache__desc_buf_init(&buf);
  encode_sampler(&w, info, reduction, border);
  r = object_make(&w, NULL, ret_object);
  pcache__desc_buf_release(&buf);
  return r;
}

static int binding_cmp(const void *a, const void *b) {
  const VkDescriptorSetLayoutBinding *x = *(const VkDescriptorSetLayoutBinding *const *)a;
  const VkDescriptorSetLayoutBinding *y = *(const VkDescriptorSetLayoutBinding *const *)b;
  return x->binding < y->binding ? -1 : x->binding > y->binding;
}

int pcache__desc_set_layout(const VkDescriptorSetLayoutCreateInfo *info,
                            const pcache__desc_lookup *lookup, pcache__desc_object **ret_object) {
  const VkDescriptorSetLayoutBindingFlagsCreateInfo *flags = NULL;
  const VkDescriptorSetLayoutBinding **order = NULL;
  pcache__desc_buf buf;
  pcache__desc_writer w = {&buf, 0};
  int r = 0;
  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO)
      return PCACHE_EUNHASHABLE;
    flags = (const void *)s;
  }
  if (flags && flags->bindingCount != 0 && flags->bindingCount != info->bindingCount)
    return PCACHE_EUNHASHABLE;
  if (info->bindingCount) {
    order = pcache__malloc(info->bindingCount * sizeof(*order));
    if (!order)
      return -ENOMEM;
  }
  /* Bindings are sorted by number: their order in the array means nothing. */
  for (uint32_t i = 0; i < info->bindingCount; i++)
    order[i] = &info->pBindings[i];
  if (info->bindingCount > 1)
    qsort(order, info->bindingCount, sizeof(*order), binding_cmp);
  pcache__desc_buf_init(&buf);
  put_u32(&w, 1, info->flags);
  for (uint32_t i = 0; i < info->bindingCount; i++) {
    const VkDescriptorSetLayoutBinding *b = order[i];
    size_t m = msg_begin(&w, 2);
    put_u32(&w, 1, b->binding);
    put_u32(&w, 2, b->descriptorType);
    put_u32(&w, 3, b->descriptorCount);
    put_u32(&w, 4, b->stageFlags);
    if ((b->descriptorType == VK_DESCRIPTOR_TYPE_SAMPLER ||
         b->descriptorType == VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER) &&
        b->pImmutableSamplers) {
      for (uint32_t j = 0; j < b->descriptorCount; j++) {
        const pcache__desc_object *o =
            lookup->sampler ? lookup->sampler(lookup->ctx, b->pImmutableSamplers[j]) : NULL;
        if (!o) {
          r = PCACHE_EUNHASHABLE;
          goto out_release;
        }
        put_object(&w, 5, o);
      }
    }
    if (flags && flags->bindingCount)
      put_u32(&w, 6, flags->pBindingFlags[b - info->pBindings]);
    msg_end(&w, m);
  }
  r = object_make(&w, NULL, ret_object);
out_release:
  pcache__desc_buf_release(&buf);
  pcache__free(order);
  return r;
}

int pcache__desc_pipeline_layout(const VkPipelineLayoutCreateInfo *info,
                                 const pcache__desc_lookup *lookup,
                                 pcache__desc_object **ret_object) {
  pcache__desc_buf buf;
  pcache__desc_writer w = {&buf, 0};
  int r = 0;
  if (info->pNext)
    return PCACHE_EUNHASHABLE;
  pcache__desc_buf_init(&buf);
  put_u32(&w, 1, info->flags);
  for (uint32_t i = 0; i < info->setLayoutCount; i++) {
    const pcache__desc_object *o =
        lookup->set_layout ? lookup->set_layout(lookup->ctx, info->pSetLayouts[i]) : NULL;
    if (!o) {
      r = PCACHE_EUNHASHABLE;
      goto out_release;
    }
    put_object(&w, 2, o);
  }
  for (uint32_t i = 0; i < info->pushConstantRangeCount; i++) {
    const VkPushConstantRange *p = &info->pPushConstantRanges[i];
    size_t m = msg_begin(&w, 3);
    put_u32(&w, 1, p->stageFlags);
    put_u32(&w, 2, p->offset);
    put_u32(&w, 3, p->size);
    msg_end(&w, m);
  }
  r = object_make(&w, NULL, ret_object);
out_release:
  pcache__desc_buf_release(&buf);
  return r;
}

/* What a render pass 1 input attachment may read when no
 * VkRenderPassInputAttachmentAspectCreateInfo says otherwise: every aspect
 * of its format. Written out so that render pass 1 and 2 describe alike. */
static uint32_t format_aspects(VkFormat f) {
  switch (f) {
  case VK_FORMAT_D16_UNORM:
  case VK_FORMAT_X8_D24_UNORM_PACK32:
  case VK_FORMAT_D32_SFLOAT:
    return VK_IMAGE_ASPECT_DEPTH_BIT;
  case VK_FORMAT_S8_UINT:
    return VK_IMAGE_ASPECT_STENCIL_BIT;
  case VK_FORMAT_D16_UNORM_S8_UINT:
  case VK_FORMAT_D24_UNORM_S8_UINT:
  case VK_FORMAT_D32_SFLOAT_S8_UINT:
    return VK_IMAGE_ASPECT_DEPTH_BIT | VK_IMAGE_ASPECT_STENCIL_BIT;
  default:
    return VK_IMAGE_ASPECT_COLOR_BIT;
  }
}

static void put_ref(pcache__desc_writer *w, uint32_t field, uint32_t attachment, uint32_t aspect) {
  size_t m = msg_begin(w, field);
  put_u32(w, 1, attachment);
  if (attachment != VK_ATTACHMENT_UNUSED)
    put_u32(w, 2, aspect);
  msg_end(w, m);
}

static void put_dependency(pcache__desc_writer *w, uint32_t src, uint32_t dst, uint32_t src_stage,
                           uint32_t dst_stage, uint32_t src_access, uint32_t dst_access,
                           uint32_t flags, int32_t view_offset) {
  size_t m = msg_begin(w, 4);
  put_u32(w, 1, src);
  put_u32(w, 2, dst);
  put_u32(w, 3, src_stage);
  put_u32(w, 4, dst_stage);
  put_u32(w, 5, src_access);
  put_u32(w, 6, dst_access);
  put_u32(w, 7, flags);
  put_i32(w, 8, view_offset);
  msg_end(w, m);
}

int pcache__desc_render_pass(const VkRenderPassCreateInfo *info, pcache__desc_object **ret_object) {
  const VkRenderPassMultiviewCreateInfo *mv = NULL;
  const VkRenderPassInputAttachmentAspectCreateInfo *aspects = NULL;
  pcache__desc_buf buf;
  pcache__desc_writer w = {&buf, 0};
  int r;
  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext) {
    switch (s->sType) {
    case VK_STRUCTURE_TYPE_RENDER_PASS_MULTIVIEW_CREATE_INFO:
      mv = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_RENDER_PASS_INPUT_ATTACHMENT_ASPECT_CREATE_INFO:
      aspects = (const void *)s;
      break;
    default:
      return PCACHE_EUNHASHABLE;
    }
  }
  if (mv && ((mv->subpassCount && mv->subpassCount != info->subpassCount) ||
             (mv->dependencyCount && mv->dependencyCount != info->dependencyCount)))
    return PCACHE_EUNHASHABLE;
  pcache__desc_buf_init(&buf);
  put_u32(&w, 1, info->flags);
  for (uint32_t i = 0; i < info->attachmentCount; i++) {
    const VkAttachmentDescription *a = &info->pAttachments[i];
    size_t m = msg_begin(&w, 2);
    put_u32(&w, 1, a->flags);
    put_u32(&w, 2, a->format);
    put_u32(&w, 3, a->samples);
    msg_end(&w, m);
  }
  for (uint32_t i = 0; i < info->subpassCount; i++) {
    const VkSubpassDescription *sp = &info->pSubpasses[i];
    size_t m = msg_begin(&w, 3);
    put_u32(&w, 1, sp->flags);
    put_u32(&w, 2, sp->pipelineBindPoint);
    for (uint32_t j = 0; j < sp->inputAttachmentCount; j++) {
      uint32_t att = sp->pInputAttachments[j].attachment, aspect = 0;
      if (att != VK_ATTACHMENT_UNUSED) {
        if (att >= info->attachmentCount) {
          w.err = PCACHE_EUNHASHABLE;
          break;
        }
        aspect = format_aspects(info->pAttachments[att].format);
      }
      for (uint32_t k = 0; aspects && k < aspects->aspectReferenceCount; k++) {
        const VkInputAttachmentAspectReference *ar = &aspects->pAspectReferences[k];
        if (ar->subpass == i && ar->inputAttachmentIndex == j)
          aspect = ar->aspectMask;
      }
      put_ref(&w, 3, att, aspect);
    }
    for (uint32_t j = 0; j < sp->colorAttachmentCount; j++)
      put_ref(&w, 4, sp->pColorAttachments[j].attachment, 0);
    for (uint32_t j = 0; sp->pResolveAttachments && j < sp->colorAttachmentCount; j++)
      put_ref(&w, 5, sp->pResolveAttachments[j].attachment, 0);
    if (sp->pDepthStencilAttachment)
      put_ref(&w, 6, sp->pDepthStencilAttachment->attachment, 0);
    if (mv && mv->subpassCount)
      put_u32(&w, 7, mv->pViewMasks[i]);
    msg_end(&w, m);
  }
  for (uint32_t i = 0; i < info->dependencyCount; i++) {
    const VkSubpassDependency *d = &info->pDependencies[i];
    put_dependency(&w, d->srcSubpass, d->dstSubpass, d->srcStageMask, d->dstStageMask,
                   d->srcAccessMask, d->dstAccessMask, d->dependencyFlags,
                   mv && mv->dependencyCount ? mv->pViewOffsets[i] : 0);
  }
  if (mv)
    put_packed_u32(&w, 5, mv->pCorrelationMasks, mv->correlationMaskCount);
  r = object_make(&w, NULL, ret_object);
  pcache__desc_buf_release(&buf);
  return r;
}

/* Structures in render pass 2 chains that only carry layouts. */
static int layout_only_chain(const void *pnext) {
  for (const VkBaseInStructure *s = pnext; s; s = s->pNext)
    if (s->sType != VK_STRUCTURE_TYPE_ATTACHMENT_DESCRIPTION_STENCIL_LAYOUT &&
        s->sType != VK_STRUCTURE_TYPE_ATTACHMENT_REFERENCE_STENCIL_LAYOUT)
      return 0;
  return 1;
}

int pcache__desc_render_pass2(const VkRenderPassCreateInfo2 *info,
                              pcache__desc_object **ret_object) {
  pcache__desc_buf buf;
  pcache__desc_writer w = {&buf, 0};
  int r;
  if (info->pNext)
    return PCACHE_EUNHASHABLE;
  pcache__desc_buf_init(&buf);
  put_u32(&w, 1, info->flags);
  for (uint32_t i = 0; i < info->attachmentCount; i++) {
    const VkAttachmentDescription2 *a = &info->pAttachments[i];
    size_t m;
    if (!layout_only_chain(a->pNext))
      w.err = PCACHE_EUNHASHABLE;
    m = msg_begin(&w, 2);
    put_u32(&w, 1, a->flags);
    put_u32(&w, 2, a->format);
    put_u32(&w, 3, a->samples);
    msg_end(&w, m);
  }
  for (uint32_t i = 0; i < info->subpassCount; i++) {
    const VkSubpassDescription2 *sp = &info->pSubpasses[i];
    size_t m;
    /* Depth/stencil resolve, shading rate attachments...: not described. */
    if (sp->pNext)
      w.err = PCACHE_EUNHASHABLE;
    m = msg_begin(&w, 3);
    put_u32(&w, 1, sp->flags);
    put_u32(&w, 2, sp->pipelineBindPoint);
    for (uint32_t j = 0; j < sp->inputAttachmentCount; j++) {
      if (!layout_only_chain(sp->pInputAttachments[j].pNext))
        w.err = PCACHE_EUNHASHABLE;
      put_ref(&w, 3, sp->pInputAttachments[j].attachment, sp->pInputAttachments[j].aspectMask);
    }
    for (uint32_t j = 0; j < sp->colorAttachmentCount; j++)
      put_ref(&w, 4, sp->pColorAttachments[j].attachment, 0);
    for (uint32_t j = 0; sp->pResolveAttachments && j < sp->colorAttachmentCount; j++)
      put_ref(&w, 5, sp->pResolveAttachments[j].attachment, 0);
    if (sp->pDepthStencilAttachment) {
      if (!layout_only_chain(sp->pDepthStencilAttachment->pNext))
        w.err = PCACHE_EUNHASHABLE;
      put_ref(&w, 6, sp->pDepthStencilAttachment->attachment, 0);
    }
    put_u32(&w, 7, sp->viewMask);
    msg_end(&w, m);
  }
  for (uint32_t i = 0; i < info->dependencyCount; i++) {
    const VkSubpassDependency2 *d = &info->pDependencies[i];
    if (d->pNext) /* VkMemoryBarrier2 */
      w.err = PCACHE_EUNHASHABLE;
    put_dependency(&w, d->srcSubpass, d->dstSubpass, d->srcStageMask, d->dstStageMask,
                   d->srcAccessMask, d->dstAccessMask, d->dependencyFlags, d->viewOffset);
  }
  put_packed_u32(&w, 5, info->pCorrelatedViewMasks, info->correlatedViewMaskCount);
  r = object_make(&w, NULL, ret_object);
  pcache__desc_buf_release(&buf);
  return r;
}

/* A library's object is its whole description, hashed as the pipeline
 * was: a linked pipeline embeds it as one of PipelineDesc.libraries. */
int pcache__desc_pipeline_library(const pcache__desc_buf *desc, const pcache__desc_keys *keys,
                                  pcache__desc_object **ret_object) {
  return object_copy(desc->data, desc->size, &keys->state_hash, ret_object);
}
