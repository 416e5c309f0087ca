/* The describer: Vulkan create infos -> canonical PipelineDesc bytes, the
 * state hash and the tier-1 key. docs/pipeline-desc.md is the rulebook;
 * the describer's files follow it field by field (desc_internal.h lists
 * them). This one has the output buffer, what every pipeline has (shader
 * stages, the keys) and compute pipelines, which have nothing more.
 *
 * The bytes are written by hand in field-number order with proto3's rules
 * (defaults left out, minimal varints, repeated scalars packed), exactly as
 * protobuf-c would pack the same message: tests/desc checks that
 * pack(unpack(x)) == x. */
#include "desc_internal.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common/alloc.h"

/* ------------------------------------------------------------ the buffer */

void pcache__desc_buf_init(pcache__desc_buf *buf) {
  buf->data = buf->inline_storage;
  buf->size = 0;
  buf->capacity = sizeof(buf->inline_storage);
  buf->heap = 0;
  buf->unhashable_reason = NULL;
  buf->unhashable_stype = 0;
  buf->unhashable_object = 0;
  buf->unhashable_handle = 0;
}

void pcache__desc_buf_release(pcache__desc_buf *buf) {
  if (buf->heap)
    pcache__free(buf->data);
  pcache__desc_buf_init(buf);
}

int pcache__desc_buf_grow(pcache__desc_writer *w, size_t extra) {
  pcache__desc_buf *b = w->buf;
  size_t cap = b->capacity;
  uint8_t *p;
  if (w->err)
    return -1;
  /* A legal create info can name the same bytes many times over (each of
   * a million specialization entries may cover all of its data): past
   * this its description is not worth its memory, and no daemon would
   * take its upload (the frame limit is 64 MiB). */
  if (extra > PCACHE_DESC_MAX_BYTES - b->size) {
    w->err = desc_unhashable(w, "too_large", 0);
    return -1;
  }
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

/* ------------------------------------------------------- stages and keys */

#define MAX_STAGES 8

static int put_stage(pcache__desc_writer *w, const VkPipelineShaderStageCreateInfo *st,
                     const pcache__desc_lookup *lookup) {
  const VkPipelineShaderStageRequiredSubgroupSizeCreateInfo *subgroup = NULL;
  const pcache__desc_object *module;
  const VkSpecializationInfo *spec = st->pSpecializationInfo;
  size_t m;
  for (const VkBaseInStructure *s = st->pNext; s; s = s->pNext) {
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO)
      return desc_unhashable(w, "pnext", (uint32_t)s->sType);
    subgroup = (const void *)s;
  }
  module = st->module && lookup->shader_module ? lookup->shader_module(lookup->ctx, st->module)
                                               : NULL;
  if (!module)
    return desc_unrecorded(w, "unrecorded_shader_module", VK_OBJECT_TYPE_SHADER_MODULE,
                           (uint64_t)st->module);
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
      return desc_unhashable(w, "bad_specialization", 0);
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

int pcache__desc_put_stages(pcache__desc_writer *w, const VkPipelineShaderStageCreateInfo *stages,
                            uint32_t count, const pcache__desc_lookup *lookup,
                            uint32_t *ret_stage_mask) {
  const VkPipelineShaderStageCreateInfo *sorted[MAX_STAGES];
  uint32_t mask = 0;
  int r;
  if (count > MAX_STAGES)
    return desc_unhashable(w, "too_many_stages", 0);
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

void pcache__desc_finish_keys(pcache__desc_writer *w, size_t global_start, size_t global_end,
                              uint32_t samples, pcache__desc_keys *ret_keys) {
  pcache__hash128(w->buf->data, w->buf->size, &ret_keys->state_hash);
  ret_keys->tier1_key =
      XXH3_64bits_withSeed(w->buf->data + global_start, global_end - global_start, samples);
}

/* ------------------------------------------------------------ compute */

int pcache__desc_compute(const VkComputePipelineCreateInfo *info, const pcache__desc_lookup *lookup,
                         pcache__desc_buf *buf, pcache__desc_keys *ret_keys) {
  const pcache__desc_object *layout;
  uint32_t stage_mask;
  pcache__desc_writer w = {buf, 0};
  int r;
  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext)
    if (s->sType != VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO)
      return desc_unhashable(&w, "pnext", (uint32_t)s->sType);
  layout = lookup->pipeline_layout ? lookup->pipeline_layout(lookup->ctx, info->layout) : NULL;
  if (!layout)
    return desc_unrecorded(&w, "unrecorded_pipeline_layout", VK_OBJECT_TYPE_PIPELINE_LAYOUT,
                           (uint64_t)info->layout);
  buf->size = 0;
  put_u32(&w, 1, PCACHE_DESC_FORMAT_VERSION);
  put_u32(&w, 2, 2 /* ENTRY_KIND_COMPUTE */);
  put_u32(&w, 3, info->flags & ~(uint32_t)IGNORED_PIPELINE_FLAGS);
  r = pcache__desc_put_stages(&w, &info->stage, 1, lookup, &stage_mask);
  if (r < 0)
    return r;
  put_object(&w, 5, layout);
  if (w.err)
    return w.err;
  pcache__desc_finish_keys(&w, buf->size, buf->size, 0, ret_keys);
  return 0;
}

/* proto/desc_check.c repeats the version; keep them in step. */
_Static_assert(PCACHE_DESC_FORMAT_VERSION == 1, "update proto/desc_check.c too");
