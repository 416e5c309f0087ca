/* The describer: Vulkan create infos -> canonical PipelineDesc bytes, the
 * state hash and the tier-1 key. docs/pipeline-desc.md is the rulebook; this
 * file follows it field by field.
 *
 * The bytes are written by hand in field-number order with proto3's rules
 * (defaults left out, minimal varints, repeated scalars packed), exactly as
 * protobuf-c would pack the same message: tests/desc checks that
 * pack(unpack(x)) == x. */
#include "desc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/alloc.h"

/* ------------------------------------------------------------ the writer */

#define WT_VARINT 0
#define WT_LEN 2
#define WT_FIXED32 5

/* Errors are sticky so the encoders read as straight lines of puts. */
typedef struct writer {
  pcache__desc_buf *buf;
  int err;
} writer;

void pcache__desc_buf_init(pcache__desc_buf *buf) {
  buf->data = buf->inline_storage;
  buf->size = 0;
  buf->capacity = sizeof(buf->inline_storage);
  buf->heap = 0;
}

void pcache__desc_buf_release(pcache__desc_buf *buf) {
  if (buf->heap)
    pcache__free(buf->data);
  pcache__desc_buf_init(buf);
}

static int buf_grow(writer *w, size_t extra) {
  pcache__desc_buf *b = w->buf;
  size_t cap = b->capacity;
  uint8_t *p;
  if (w->err)
    return -1;
  while (cap - b->size < extra)
    cap *= 2;
  if (b->heap) {
    p = pcache__realloc(b->data, cap);
  } else {
    p = pcache__malloc(cap);
    if (p)
      memcpy(p, b->data, b->size);
  }
  if (!p) {
    w->err = -ENOMEM;
    return -1;
  }
  b->data = p;
  b->capacity = cap;
  b->heap = 1;
  return 0;
}

static inline int reserve(writer *w, size_t extra) {
  if (w->buf->capacity - w->buf->size >= extra && !w->err)
    return 0;
  return buf_grow(w, extra);
}

static inline void raw_varint(writer *w, uint64_t v) {
  uint8_t *p;
  if (reserve(w, 10))
    return;
  p = w->buf->data + w->buf->size;
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  w->buf->size = (size_t)(p - w->buf->data);
}

static inline void raw_bytes(writer *w, const void *data, size_t size) {
  if (size == 0 || reserve(w, size))
    return;
  memcpy(w->buf->data + w->buf->size, data, size);
  w->buf->size += size;
}

static inline void put_tag(writer *w, uint32_t field, uint32_t wire_type) {
  raw_varint(w, (uint64_t)field << 3 | wire_type);
}

static inline void put_u32(writer *w, uint32_t field, uint32_t v) {
  if (v) {
    put_tag(w, field, WT_VARINT);
    raw_varint(w, v);
  }
}

/* protobuf int32: negative values are sign-extended to ten bytes. */
static inline void put_i32(writer *w, uint32_t field, int32_t v) {
  if (v) {
    put_tag(w, field, WT_VARINT);
    raw_varint(w, (uint64_t)(int64_t)v);
  }
}

static inline void put_bool(writer *w, uint32_t field, VkBool32 v) { put_u32(w, field, v ? 1 : 0); }

static inline void raw_float(writer *w, float f) {
  uint32_t bits;
  uint8_t le[4];
  memcpy(&bits, &f, 4);
  le[0] = (uint8_t)bits;
  le[1] = (uint8_t)(bits >> 8);
  le[2] = (uint8_t)(bits >> 16);
  le[3] = (uint8_t)(bits >> 24);
  raw_bytes(w, le, 4);
}

/* protobuf-c leaves out a float that compares equal to 0, -0.0 included. */
static inline void put_float(writer *w, uint32_t field, float f) {
  if (f != 0.0f) {
    put_tag(w, field, WT_FIXED32);
    raw_float(w, f);
  }
}

static inline void put_bytes(writer *w, uint32_t field, const void *data, size_t size) {
  if (size) {
    put_tag(w, field, WT_LEN);
    raw_varint(w, size);
    raw_bytes(w, data, size);
  }
}

/* A length-delimited field whose size is known only at its end: one length
 * byte is reserved, and the body moves when it turns out longer than 127. */
static inline size_t msg_begin(writer *w, uint32_t field) {
  put_tag(w, field, WT_LEN);
  if (reserve(w, 1))
    return 0;
  w->buf->data[w->buf->size++] = 0;
  return w->buf->size;
}

static void msg_end(writer *w, size_t start) {
  size_t len, n = 1;
  uint8_t *p;
  if (w->err)
    return;
  len = w->buf->size - start;
  if (len < 0x80) {
    w->buf->data[start - 1] = (uint8_t)len;
    return;
  }
  for (size_t v = len; v >= 0x80; v >>= 7)
    n++;
  if (reserve(w, n - 1))
    return;
  p = w->buf->data + start;
  memmove(p + n - 1, p, len);
  p--;
  for (size_t v = len; v >= 0x80; v >>= 7)
    *p++ = (uint8_t)(v | 0x80);
  *p = (uint8_t)(len >> (7 * (n - 1)));
  w->buf->size += n - 1;
}

static void put_packed_u32(writer *w, uint32_t field, const uint32_t *v, size_t n) {
  size_t m;
  if (!n)
    return;
  m = msg_begin(w, field);
  for (size_t i = 0; i < n; i++)
    raw_varint(w, v[i]);
  msg_end(w, m);
}

static void put_object(writer *w, uint32_t field, const pcache__desc_object *o) {
  put_tag(w, field, WT_LEN);
  raw_varint(w, o->encoded_size);
  raw_bytes(w, o->encoded, o->encoded_size);
}

/* ------------------------------------------------------------ objects */

void pcache__desc_object_free(pcache__desc_object *object) { pcache__free(object); }

/* One allocation holds the object and its bytes. */
static int object_make(writer *w, const pcache__hash *hash, pcache__desc_object **ret_object) {
  pcache__desc_object *o;
  if (w->err)
    return w->err;
  o = pcache__malloc(sizeof(*o) + w->buf->size + 1);
  if (!o)
    return -ENOMEM;
  o->encoded = (uint8_t *)(o + 1);
  o->encoded_size = w->buf->size;
  memcpy(o->encoded, w->buf->data, w->buf->size);
  if (hash)
    o->hash = *hash;
  else
    pcache__hash128(o->encoded, o->encoded_size, &o->hash);
  *ret_object = o;
  return 0;
}

int pcache__desc_shader_module(const VkShaderModuleCreateInfo *info,
                               pcache__desc_object **ret_object) {
  pcache__desc_buf buf;
  writer w = {&buf, 0};
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

static void encode_sampler(writer *w, const VkSamplerCreateInfo *info,
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
  writer w = {&buf, 0};
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
  writer w = {&buf, 0};
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
  writer w = {&buf, 0};
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

static void put_ref(writer *w, uint32_t field, uint32_t attachment, uint32_t aspect) {
  size_t m = msg_begin(w, field);
  put_u32(w, 1, attachment);
  if (attachment != VK_ATTACHMENT_UNUSED)
    put_u32(w, 2, aspect);
  msg_end(w, m);
}

static void put_dependency(writer *w, uint32_t src, uint32_t dst, uint32_t src_stage,
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
  writer w = {&buf, 0};
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
  writer w = {&buf, 0};
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

/* ------------------------------------------------------------ reading back */

/* Minimal protobuf reading of our own render pass encoding: the describer
 * needs to know whether a subpass has color and depth/stencil attachments,
 * since the create info's pointers to that state are to be ignored (and may
 * be garbage) when it has none. */
typedef struct reader {
  const uint8_t *p, *end;
} reader;

static int rd_varint(reader *r, uint64_t *ret) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64 && r->p < r->end; shift += 7) {
    uint8_t b = *r->p++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *ret = v;
      return 0;
    }
  }
  return -1;
}

/* Next field: its number and, for length-delimited ones, the body. */
static int rd_field(reader *r, uint32_t *ret_field, uint64_t *ret_value, reader *ret_body) {
  uint64_t tag, v;
  if (rd_varint(r, &tag))
    return -1;
  switch (tag & 7) {
  case WT_VARINT:
    if (rd_varint(r, &v))
      return -1;
    break;
  case WT_LEN:
    if (rd_varint(r, &v) || v > (uint64_t)(r->end - r->p))
      return -1;
    ret_body->p = r->p;
    ret_body->end = r->p + v;
    r->p += v;
    break;
  case WT_FIXED32:
    if (r->end - r->p < 4)
      return -1;
    r->p += 4;
    v = 0;
    break;
  default:
    return -1;
  }
  *ret_field = (uint32_t)(tag >> 3);
  *ret_value = v;
  return 0;
}

static uint32_t ref_attachment(reader body) {
  uint32_t f;
  uint64_t v;
  reader sub;
  uint32_t att = 0;
  while (body.p < body.end && !rd_field(&body, &f, &v, &sub))
    if (f == 1)
      att = (uint32_t)v;
  return att;
}

static int subpass_usage(const pcache__desc_object *rp, uint32_t subpass, int *ret_color,
                         int *ret_depth) {
  reader r = {rp->encoded, rp->encoded + rp->encoded_size}, body, sub, ref;
  uint32_t f, index = 0;
  uint64_t v;
  while (r.p < r.end) {
    if (rd_field(&r, &f, &v, &body))
      return -1;
    if (f != 3 || index++ != subpass)
      continue;
    *ret_color = 0;
    *ret_depth = 0;
    while (body.p < body.end) {
      if (rd_field(&body, &f, &v, &sub))
        return -1;
      ref = sub;
      if (f == 4 && ref_attachment(ref) != VK_ATTACHMENT_UNUSED)
        *ret_color = 1;
      if (f == 6 && ref_attachment(ref) != VK_ATTACHMENT_UNUSED)
        *ret_depth = 1;
    }
    return 0;
  }
  return -1;
}

/* ------------------------------------------------------------ pipelines */

/* Flags that change how the call behaves, not what is compiled. */
#define IGNORED_PIPELINE_FLAGS                                                                     \
  (VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT | VK_PIPELINE_CREATE_DERIVATIVE_BIT |                  \
   VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT |                                      \
   VK_PIPELINE_CREATE_EARLY_RETURN_ON_FAILURE_BIT)

/* Dynamic states the describer acts on, as bits. */
enum {
  DYN_VIEWPORT = 1u << 0,
  DYN_SCISSOR = 1u << 1,
  DYN_LINE_WIDTH = 1u << 2,
  DYN_DEPTH_BIAS = 1u << 3,
  DYN_BLEND_CONSTANTS = 1u << 4,
  DYN_DEPTH_BOUNDS = 1u << 5,
  DYN_STENCIL_COMPARE_MASK = 1u << 6,
  DYN_STENCIL_WRITE_MASK = 1u << 7,
  DYN_STENCIL_REFERENCE = 1u << 8,
  DYN_CULL_MODE = 1u << 9,
  DYN_FRONT_FACE = 1u << 10,
  DYN_PRIMITIVE_TOPOLOGY = 1u << 11,
  DYN_VIEWPORT_WITH_COUNT = 1u << 12,
  DYN_SCISSOR_WITH_COUNT = 1u << 13,
  DYN_VERTEX_INPUT_BINDING_STRIDE = 1u << 14,
  DYN_DEPTH_TEST_ENABLE = 1u << 15,
  DYN_DEPTH_WRITE_ENABLE = 1u << 16,
  DYN_DEPTH_COMPARE_OP = 1u << 17,
  DYN_DEPTH_BOUNDS_TEST_ENABLE = 1u << 18,
  DYN_STENCIL_TEST_ENABLE = 1u << 19,
  DYN_STENCIL_OP = 1u << 20,
  DYN_PATCH_CONTROL_POINTS = 1u << 21,
  DYN_RASTERIZER_DISCARD_ENABLE = 1u << 22,
  DYN_DEPTH_BIAS_ENABLE = 1u << 23,
  DYN_LOGIC_OP = 1u << 24,
  DYN_PRIMITIVE_RESTART_ENABLE = 1u << 25,
  DYN_LINE_STIPPLE = 1u << 26,
  DYN_COLOR_WRITE_ENABLE = 1u << 27,
  DYN_VERTEX_INPUT = 1u << 28,
};

static uint32_t dyn_bit(VkDynamicState s) {
  if ((uint32_t)s <= VK_DYNAMIC_STATE_STENCIL_REFERENCE)
    return 1u << s;
  if (s >= VK_DYNAMIC_STATE_CULL_MODE && s <= VK_DYNAMIC_STATE_STENCIL_OP)
    return 1u << (9 + (s - VK_DYNAMIC_STATE_CULL_MODE));
  if (s >= VK_DYNAMIC_STATE_PATCH_CONTROL_POINTS_EXT && s <= VK_DYNAMIC_STATE_PRIMITIVE_RESTART_ENABLE)
    return 1u << (21 + (s - VK_DYNAMIC_STATE_PATCH_CONTROL_POINTS_EXT));
  if (s == VK_DYNAMIC_STATE_LINE_STIPPLE_EXT)
    return DYN_LINE_STIPPLE;
  if (s == VK_DYNAMIC_STATE_COLOR_WRITE_ENABLE_EXT)
    return DYN_COLOR_WRITE_ENABLE;
  if (s == VK_DYNAMIC_STATE_VERTEX_INPUT_EXT)
    return DYN_VERTEX_INPUT;
  return 0;
}

#define MAX_DYNAMIC 64
#define MAX_STAGES 8

static int put_stage(writer *w, const VkPipelineShaderStageCreateInfo *st,
                     const pcache__desc_lookup *lookup) {
  const VkPipelineShaderStageRequiredSubgroupSizeCreateInfo *subgroup = NULL;
  const pcache__desc_object *module;
  const VkSpecializationInfo *spec = st->pSpecializationInfo;
  size_t m;
  for (const VkBaseInStructure *s = st->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO)
      return PCACHE_EUNHASHABLE;
    subgroup = (const void *)s;
  }
  module = st->module && lookup->shader_module ? lookup->shader_module(lookup->ctx, st->module)
                                               : NULL;
  if (!module)
    return PCACHE_EUNHASHABLE;
  m = msg_begin(w, 4);
  put_u32(w, 1, st->stage);
  put_u32(w, 2, st->flags);
  put_object(w, 3, module);
  if (st->pName)
    put_bytes(w, 4, st->pName, strlen(st->pName));
  for (uint32_t i = 0; spec && i < spec->mapEntryCount; i++) {
    const VkSpecializationMapEntry *e = &spec->pMapEntries[i];
    size_t n;
    /* Only the bytes an entry names are hashed, so padding and unused
     * data in pData do not split entries. */
    if (e->offset > spec->dataSize || e->size > spec->dataSize - e->offset)
      return PCACHE_EUNHASHABLE;
    n = msg_begin(w, 5);
    put_u32(w, 1, e->constantID);
    put_bytes(w, 2, (const uint8_t *)spec->pData + e->offset, e->size);
    msg_end(w, n);
  }
  if (subgroup)
    put_u32(w, 6, subgroup->requiredSubgroupSize);
  msg_end(w, m);
  return 0;
}

static int put_stages(writer *w, const VkPipelineShaderStageCreateInfo *stages, uint32_t count,
                      const pcache__desc_lookup *lookup, uint32_t *ret_stage_mask) {
  const VkPipelineShaderStageCreateInfo *sorted[MAX_STAGES];
  uint32_t mask = 0;
  int r;
  if (count > MAX_STAGES)
    return PCACHE_EUNHASHABLE;
  /* Sorted by stage bit (insertion sort: at most a handful). */
  for (uint32_t i = 0; i < count; i++) {
    uint32_t j = i;
    while (j > 0 && sorted[j - 1]->stage > stages[i].stage) {
      sorted[j] = sorted[j - 1];
      j--;
    }
    sorted[j] = &stages[i];
    mask |= stages[i].stage;
  }
  for (uint32_t i = 0; i < count; i++) {
    r = put_stage(w, sorted[i], lookup);
    if (r < 0)
      return r;
  }
  *ret_stage_mask = mask;
  return 0;
}

static void finish_keys(writer *w, size_t global_start, size_t global_end, uint32_t samples,
                        pcache__desc_keys *ret_keys) {
  pcache__hash128(w->buf->data, w->buf->size, &ret_keys->state_hash);
  ret_keys->tier1_key =
      XXH3_64bits_withSeed(w->buf->data + global_start, global_end - global_start, samples);
}

static int put_vertex_input(writer *w, const VkPipelineVertexInputStateCreateInfo *vi,
                            uint32_t dyn) {
  const VkPipelineVertexInputDivisorStateCreateInfoEXT *div = NULL;
  size_t m;
  for (const VkBaseInStructure *s = vi->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_DIVISOR_STATE_CREATE_INFO_EXT)
      return PCACHE_EUNHASHABLE;
    div = (const void *)s;
  }
  m = msg_begin(w, 9);
  for (uint32_t i = 0; i < vi->vertexBindingDescriptionCount; i++) {
    const VkVertexInputBindingDescription *b = &vi->pVertexBindingDescriptions[i];
    size_t n = msg_begin(w, 1);
    put_u32(w, 1, b->binding);
    if (!(dyn & DYN_VERTEX_INPUT_BINDING_STRIDE))
      put_u32(w, 2, b->stride);
    put_u32(w, 3, b->inputRate);
    if (b->inputRate == VK_VERTEX_INPUT_RATE_INSTANCE) {
      uint32_t d = 1;
      for (uint32_t j = 0; div && j < div->vertexBindingDivisorCount; j++)
        if (div->pVertexBindingDivisors[j].binding == b->binding)
          d = div->pVertexBindingDivisors[j].divisor;
      put_u32(w, 4, d);
    }
    msg_end(w, n);
  }
  for (uint32_t i = 0; i < vi->vertexAttributeDescriptionCount; i++) {
    const VkVertexInputAttributeDescription *a = &vi->pVertexAttributeDescriptions[i];
    size_t n = msg_begin(w, 2);
    put_u32(w, 1, a->location);
    put_u32(w, 2, a->binding);
    put_u32(w, 3, a->format);
    put_u32(w, 4, a->offset);
    msg_end(w, n);
  }
  msg_end(w, m);
  return 0;
}

static int put_rasterization(writer *w, const VkPipelineRasterizationStateCreateInfo *rs,
                             uint32_t dyn) {
  const VkPipelineRasterizationConservativeStateCreateInfoEXT *cons = NULL;
  const VkPipelineRasterizationStateStreamCreateInfoEXT *stream = NULL;
  const VkPipelineRasterizationLineStateCreateInfoEXT *line = NULL;
  const VkPipelineRasterizationDepthClipStateCreateInfoEXT *clip = NULL;
  const VkPipelineRasterizationProvokingVertexStateCreateInfoEXT *provoking = NULL;
  int bias;
  size_t m;
  for (const VkBaseInStructure *s = rs->pNext; s; s = s->pNext) {
    switch (s->sType) {
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_CONSERVATIVE_STATE_CREATE_INFO_EXT:
      cons = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_STREAM_CREATE_INFO_EXT:
      stream = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_LINE_STATE_CREATE_INFO_EXT:
      line = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_DEPTH_CLIP_STATE_CREATE_INFO_EXT:
      clip = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_PROVOKING_VERTEX_STATE_CREATE_INFO_EXT:
      provoking = (const void *)s;
      break;
    default:
      return PCACHE_EUNHASHABLE;
    }
  }
  bias = (dyn & DYN_DEPTH_BIAS_ENABLE) || rs->depthBiasEnable;
  m = msg_begin(w, 13);
  put_bool(w, 1, rs->depthClampEnable);
  if (!(dyn & DYN_RASTERIZER_DISCARD_ENABLE))
    put_bool(w, 2, rs->rasterizerDiscardEnable);
  put_u32(w, 3, rs->polygonMode);
  if (!(dyn & DYN_CULL_MODE))
    put_u32(w, 4, rs->cullMode);
  if (!(dyn & DYN_FRONT_FACE))
    put_u32(w, 5, rs->frontFace);
  if (!(dyn & DYN_DEPTH_BIAS_ENABLE))
    put_bool(w, 6, rs->depthBiasEnable);
  if (bias && !(dyn & DYN_DEPTH_BIAS)) {
    put_float(w, 7, rs->depthBiasConstantFactor);
    put_float(w, 8, rs->depthBiasClamp);
    put_float(w, 9, rs->depthBiasSlopeFactor);
  }
  if (!(dyn & DYN_LINE_WIDTH))
    put_float(w, 10, rs->lineWidth);
  if (cons) {
    put_u32(w, 11, cons->conservativeRasterizationMode);
    if (cons->conservativeRasterizationMode ==
        VK_CONSERVATIVE_RASTERIZATION_MODE_OVERESTIMATE_EXT)
      put_float(w, 12, cons->extraPrimitiveOverestimationSize);
  }
  if (stream)
    put_u32(w, 13, stream->rasterizationStream);
  if (line) {
    put_u32(w, 14, line->lineRasterizationMode);
    put_bool(w, 15, line->stippledLineEnable);
    if (line->stippledLineEnable && !(dyn & DYN_LINE_STIPPLE)) {
      put_u32(w, 16, line->lineStippleFactor);
      put_u32(w, 17, line->lineStipplePattern);
    }
  }
  /* Without the struct depth clip follows !depthClampEnable; only a
   * departure from that is state. */
  if (clip && !clip->depthClipEnable != !rs->depthClampEnable)
    put_bool(w, 18, 1);
  if (provoking)
    put_u32(w, 19, provoking->provokingVertexMode);
  msg_end(w, m);
  return 0;
}

static void put_stencil(writer *w, uint32_t field, const VkStencilOpState *s, uint32_t dyn) {
  size_t m = msg_begin(w, field);
  if (!(dyn & DYN_STENCIL_OP)) {
    put_u32(w, 1, s->failOp);
    put_u32(w, 2, s->passOp);
    put_u32(w, 3, s->depthFailOp);
    put_u32(w, 4, s->compareOp);
  }
  if (!(dyn & DYN_STENCIL_COMPARE_MASK))
    put_u32(w, 5, s->compareMask);
  if (!(dyn & DYN_STENCIL_WRITE_MASK))
    put_u32(w, 6, s->writeMask);
  if (!(dyn & DYN_STENCIL_REFERENCE))
    put_u32(w, 7, s->reference);
  msg_end(w, m);
}

static int put_depth_stencil(writer *w, const VkPipelineDepthStencilStateCreateInfo *ds,
                             uint32_t dyn) {
  int depth = (dyn & DYN_DEPTH_TEST_ENABLE) || ds->depthTestEnable;
  int bounds = (dyn & DYN_DEPTH_BOUNDS_TEST_ENABLE) || ds->depthBoundsTestEnable;
  int stencil = (dyn & DYN_STENCIL_TEST_ENABLE) || ds->stencilTestEnable;
  size_t m;
  if (ds->pNext)
    return PCACHE_EUNHASHABLE;
  m = msg_begin(w, 15);
  put_u32(w, 1, ds->flags);
  if (!(dyn & DYN_DEPTH_TEST_ENABLE))
    put_bool(w, 2, ds->depthTestEnable);
  if (depth && !(dyn & DYN_DEPTH_WRITE_ENABLE))
    put_bool(w, 3, ds->depthWriteEnable);
  if (depth && !(dyn & DYN_DEPTH_COMPARE_OP))
    put_u32(w, 4, ds->depthCompareOp);
  if (!(dyn & DYN_DEPTH_BOUNDS_TEST_ENABLE))
    put_bool(w, 5, ds->depthBoundsTestEnable);
  if (!(dyn & DYN_STENCIL_TEST_ENABLE))
    put_bool(w, 6, ds->stencilTestEnable);
  if (stencil) {
    put_stencil(w, 7, &ds->front, dyn);
    put_stencil(w, 8, &ds->back, dyn);
  }
  if (bounds && !(dyn & DYN_DEPTH_BOUNDS)) {
    put_float(w, 9, ds->minDepthBounds);
    put_float(w, 10, ds->maxDepthBounds);
  }
  msg_end(w, m);
  return 0;
}

static int put_color_blend(writer *w, const VkPipelineColorBlendStateCreateInfo *cb,
                           uint32_t dyn) {
  const VkPipelineColorWriteCreateInfoEXT *cw = NULL;
  size_t m;
  for (const VkBaseInStructure *s = cb->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_COLOR_WRITE_CREATE_INFO_EXT)
      return PCACHE_EUNHASHABLE;
    cw = (const void *)s;
  }
  if (dyn & DYN_COLOR_WRITE_ENABLE)
    cw = NULL;
  if (cw && cw->attachmentCount != cb->attachmentCount)
    return PCACHE_EUNHASHABLE;
  m = msg_begin(w, 16);
  put_u32(w, 1, cb->flags);
  put_bool(w, 2, cb->logicOpEnable);
  if (cb->logicOpEnable && !(dyn & DYN_LOGIC_OP))
    put_u32(w, 3, cb->logicOp);
  for (uint32_t i = 0; i < cb->attachmentCount; i++) {
    const VkPipelineColorBlendAttachmentState *a = &cb->pAttachments[i];
    size_t n = msg_begin(w, 4);
    put_bool(w, 1, a->blendEnable);
    if (a->blendEnable) {
      put_u32(w, 2, a->srcColorBlendFactor);
      put_u32(w, 3, a->dstColorBlendFactor);
      put_u32(w, 4, a->colorBlendOp);
      put_u32(w, 5, a->srcAlphaBlendFactor);
      put_u32(w, 6, a->dstAlphaBlendFactor);
      put_u32(w, 7, a->alphaBlendOp);
    }
    put_u32(w, 8, a->colorWriteMask);
    if (cw)
      put_bool(w, 9, !cw->pColorWriteEnables[i]);
    msg_end(w, n);
  }
  if (!(dyn & DYN_BLEND_CONSTANTS)) {
    size_t n = msg_begin(w, 5);
    for (int i = 0; i < 4; i++)
      raw_float(w, cb->blendConstants[i]);
    msg_end(w, n);
  }
  msg_end(w, m);
  return 0;
}

static void put_viewport(writer *w, const VkPipelineViewportStateCreateInfo *vp, uint32_t dyn) {
  size_t m = msg_begin(w, 12);
  if (!(dyn & DYN_VIEWPORT_WITH_COUNT))
    put_u32(w, 1, vp->viewportCount);
  if (!(dyn & DYN_SCISSOR_WITH_COUNT))
    put_u32(w, 2, vp->scissorCount);
  if (!(dyn & (DYN_VIEWPORT | DYN_VIEWPORT_WITH_COUNT)) && vp->pViewports) {
    for (uint32_t i = 0; i < vp->viewportCount; i++) {
      const VkViewport *v = &vp->pViewports[i];
      size_t n = msg_begin(w, 3);
      put_float(w, 1, v->x);
      put_float(w, 2, v->y);
      put_float(w, 3, v->width);
      put_float(w, 4, v->height);
      put_float(w, 5, v->minDepth);
      put_float(w, 6, v->maxDepth);
      msg_end(w, n);
    }
  }
  if (!(dyn & (DYN_SCISSOR | DYN_SCISSOR_WITH_COUNT)) && vp->pScissors) {
    for (uint32_t i = 0; i < vp->scissorCount; i++) {
      const VkRect2D *s = &vp->pScissors[i];
      size_t n = msg_begin(w, 4);
      put_i32(w, 1, s->offset.x);
      put_i32(w, 2, s->offset.y);
      put_u32(w, 3, s->extent.width);
      put_u32(w, 4, s->extent.height);
      msg_end(w, n);
    }
  }
  msg_end(w, m);
}

static int put_multisample(writer *w, const VkPipelineMultisampleStateCreateInfo *ms) {
  size_t m;
  if (ms->pNext)
    return PCACHE_EUNHASHABLE;
  m = msg_begin(w, 14);
  put_u32(w, 1, ms->rasterizationSamples);
  put_bool(w, 2, ms->sampleShadingEnable);
  if (ms->sampleShadingEnable)
    put_float(w, 3, ms->minSampleShading);
  if (ms->pSampleMask) {
    /* Only the bits of samples that exist; an all-ones mask is no mask. */
    uint32_t words[2], n = ms->rasterizationSamples > 32 ? 2 : 1, full = 1;
    for (uint32_t i = 0; i < n; i++) {
      uint32_t bits = ms->rasterizationSamples >= 32 ? 32 : ms->rasterizationSamples;
      uint32_t valid = bits == 32 ? 0xffffffffu : (1u << bits) - 1;
      words[i] = ms->pSampleMask[i] & valid;
      full &= words[i] == valid;
    }
    if (!full)
      put_packed_u32(w, 4, words, n);
  }
  put_bool(w, 5, ms->alphaToCoverageEnable);
  put_bool(w, 6, ms->alphaToOneEnable);
  msg_end(w, m);
  return 0;
}

int pcache__desc_graphics(const VkGraphicsPipelineCreateInfo *info,
                          const pcache__desc_lookup *lookup, pcache__desc_buf *buf,
                          pcache__desc_keys *ret_keys) {
  const VkPipelineRenderingCreateInfo *rendering = NULL;
  const VkPipelineRasterizationStateCreateInfo *rs = info->pRasterizationState;
  const pcache__desc_object *layout, *rp = NULL;
  uint32_t dyn = 0, stage_mask = 0, samples = 0, dyn_list[MAX_DYNAMIC], n_dyn = 0;
  int has_color = 0, has_depth = 0, discard, r;
  size_t global_start, global_end;
  writer w = {buf, 0};

  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext) {
    switch (s->sType) {
    case VK_STRUCTURE_TYPE_PIPELINE_RENDERING_CREATE_INFO:
      rendering = (const void *)s;
      break;
    case VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO:
      break;
    default:
      return PCACHE_EUNHASHABLE;
    }
  }
  if (info->pDynamicState) {
    const VkPipelineDynamicStateCreateInfo *d = info->pDynamicState;
    if (d->pNext || d->dynamicStateCount > MAX_DYNAMIC)
      return PCACHE_EUNHASHABLE;
    for (uint32_t i = 0; i < d->dynamicStateCount; i++) {
      uint32_t v = d->pDynamicStates[i], j = n_dyn;
      dyn |= dyn_bit(d->pDynamicStates[i]);
      while (j > 0 && dyn_list[j - 1] > v) {
        dyn_list[j] = dyn_list[j - 1];
        j--;
      }
      if (j > 0 && dyn_list[j - 1] == v) { /* duplicate: undo the shift */
        memmove(&dyn_list[j], &dyn_list[j + 1], (n_dyn - j) * sizeof(*dyn_list));
        continue;
      }
      dyn_list[j] = v;
      n_dyn++;
    }
  }
  layout = lookup->pipeline_layout ? lookup->pipeline_layout(lookup->ctx, info->layout) : NULL;
  if (!layout)
    return PCACHE_EUNHASHABLE;
  if (info->renderPass) {
    rp = lookup->render_pass ? lookup->render_pass(lookup->ctx, info->renderPass) : NULL;
    if (!rp || subpass_usage(rp, info->subpass, &has_color, &has_depth))
      return PCACHE_EUNHASHABLE;
  } else if (rendering) {
    has_color = rendering->colorAttachmentCount > 0;
    has_depth = rendering->depthAttachmentFormat != VK_FORMAT_UNDEFINED ||
                rendering->stencilAttachmentFormat != VK_FORMAT_UNDEFINED;
  }
  if (!rs)
    return PCACHE_EUNHASHABLE;
  discard = !(dyn & DYN_RASTERIZER_DISCARD_ENABLE) && rs->rasterizerDiscardEnable;

  buf->size = 0;
  put_u32(&w, 1, PCACHE_DESC_FORMAT_VERSION);
  put_u32(&w, 2, 1 /* ENTRY_KIND_GRAPHICS */);
  put_u32(&w, 3, info->flags & ~(uint32_t)IGNORED_PIPELINE_FLAGS);
  r = put_stages(&w, info->pStages, info->stageCount, lookup, &stage_mask);
  if (r < 0)
    return r;
  put_object(&w, 5, layout);
  global_start = buf->size;
  if (rp) {
    put_object(&w, 6, rp);
    put_u32(&w, 7, info->subpass);
  } else {
    /* No render pass and no VkPipelineRenderingCreateInfo means no
     * attachments: the same as an all-zero one. */
    size_t m = msg_begin(&w, 8);
    if (rendering) {
      put_u32(&w, 1, rendering->viewMask);
      put_packed_u32(&w, 2, (const uint32_t *)rendering->pColorAttachmentFormats,
                     rendering->colorAttachmentCount);
      put_u32(&w, 3, rendering->depthAttachmentFormat);
      put_u32(&w, 4, rendering->stencilAttachmentFormat);
    }
    msg_end(&w, m);
  }
  global_end = buf->size;
  if (!(stage_mask & VK_SHADER_STAGE_MESH_BIT_EXT)) {
    if (info->pVertexInputState && !(dyn & DYN_VERTEX_INPUT)) {
      r = put_vertex_input(&w, info->pVertexInputState, dyn);
      if (r < 0)
        return r;
    }
    if (info->pInputAssemblyState) {
      const VkPipelineInputAssemblyStateCreateInfo *ia = info->pInputAssemblyState;
      size_t m;
      if (ia->pNext)
        return PCACHE_EUNHASHABLE;
      /* The topology stays even when dynamic: its class still matters. */
      m = msg_begin(&w, 10);
      put_u32(&w, 1, ia->topology);
      if (!(dyn & DYN_PRIMITIVE_RESTART_ENABLE))
        put_bool(&w, 2, ia->primitiveRestartEnable);
      msg_end(&w, m);
    }
  }
  if ((stage_mask & VK_SHADER_STAGE_TESSELLATION_CONTROL_BIT) && info->pTessellationState) {
    const VkPipelineTessellationStateCreateInfo *ts = info->pTessellationState;
    const VkPipelineTessellationDomainOriginStateCreateInfo *origin = NULL;
    size_t m;
    for (const VkBaseInStructure *s = ts->pNext; s; s = s->pNext) {
      if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_TESSELLATION_DOMAIN_ORIGIN_STATE_CREATE_INFO)
        return PCACHE_EUNHASHABLE;
      origin = (const void *)s;
    }
    m = msg_begin(&w, 11);
    if (!(dyn & DYN_PATCH_CONTROL_POINTS))
      put_u32(&w, 1, ts->patchControlPoints);
    if (origin)
      put_u32(&w, 2, origin->domainOrigin);
    msg_end(&w, m);
  }
  if (!discard && info->pViewportState) {
    if (info->pViewportState->pNext)
      return PCACHE_EUNHASHABLE;
    put_viewport(&w, info->pViewportState, dyn);
  }
  r = put_rasterization(&w, rs, dyn);
  if (r < 0)
    return r;
  if (!discard && info->pMultisampleState) {
    samples = info->pMultisampleState->rasterizationSamples;
    r = put_multisample(&w, info->pMultisampleState);
    if (r < 0)
      return r;
  }
  if (!discard && has_depth && info->pDepthStencilState) {
    r = put_depth_stencil(&w, info->pDepthStencilState, dyn);
    if (r < 0)
      return r;
  }
  if (!discard && has_color && info->pColorBlendState) {
    r = put_color_blend(&w, info->pColorBlendState, dyn);
    if (r < 0)
      return r;
  }
  put_packed_u32(&w, 17, dyn_list, n_dyn);
  if (w.err)
    return w.err;
  finish_keys(&w, global_start, global_end, samples, ret_keys);
  return 0;
}

int pcache__desc_compute(const VkComputePipelineCreateInfo *info, const pcache__desc_lookup *lookup,
                         pcache__desc_buf *buf, pcache__desc_keys *ret_keys) {
  const pcache__desc_object *layout;
  uint32_t stage_mask;
  writer w = {buf, 0};
  int r;
  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext)
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO)
      return PCACHE_EUNHASHABLE;
  layout = lookup->pipeline_layout ? lookup->pipeline_layout(lookup->ctx, info->layout) : NULL;
  if (!layout)
    return PCACHE_EUNHASHABLE;
  buf->size = 0;
  put_u32(&w, 1, PCACHE_DESC_FORMAT_VERSION);
  put_u32(&w, 2, 2 /* ENTRY_KIND_COMPUTE */);
  put_u32(&w, 3, info->flags & ~(uint32_t)IGNORED_PIPELINE_FLAGS);
  r = put_stages(&w, &info->stage, 1, lookup, &stage_mask);
  if (r < 0)
    return r;
  put_object(&w, 5, layout);
  if (w.err)
    return w.err;
  finish_keys(&w, buf->size, buf->size, 0, ret_keys);
  return 0;
}

/* proto/desc_check.c repeats the version; keep them in step. */
_Static_assert(PCACHE_DESC_FORMAT_VERSION == 1, "update proto/desc_check.c too");
