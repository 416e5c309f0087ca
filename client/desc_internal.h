/* What the describer's files share (desc.h is what the rest of libpcache
 * sees): the protobuf writer, static inline so that the hit path's puts
 * stay inlined in every file, and the parts every pipeline has.
 *
 * The files, each calling only those listed after it:
 *   desc_graphics.c  graphics pipelines: which parts and state they carry
 *   desc_state.c     their fixed-function state and its pNext structs
 *   desc_library.c   graphics pipeline libraries: parts, linked libraries
 *   desc_objects.c   objects: shader modules, samplers, set layouts,
 *                    pipeline layouts, render passes, pipeline libraries
 *   desc.c           the buffer, shader stages, the keys, compute pipelines */
#ifndef PCACHE_CLIENT_DESC_INTERNAL_H
#define PCACHE_CLIENT_DESC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include "desc.h"
#include "proto/desc_check.h" /* PCACHE_DESC_MAX_LIBRARIES */
#include "proto/pbread.h"
#include <pcache/pcache.h> /* PCACHE_EUNHASHABLE */

/* ------------------------------------------------------------ the writer */

#define WT_VARINT PCACHE_WIRE_VARINT
#define WT_LEN PCACHE_WIRE_LEN
#define WT_FIXED32 PCACHE_WIRE_FIXED32

/* Errors are sticky so the encoders read as straight lines of puts. */
typedef struct pcache__desc_writer {
  pcache__desc_buf *buf;
  int err;
} pcache__desc_writer;

/* Records why the pipeline cannot be described (the first reason wins)
 * and returns PCACHE_EUNHASHABLE. reason is a static string. */
static inline int desc_unhashable(pcache__desc_writer *w, const char *reason, uint32_t stype) {
  if (!w->buf->unhashable_reason) {
    w->buf->unhashable_reason = reason;
    w->buf->unhashable_stype = stype;
  }
  return PCACHE_EUNHASHABLE;
}

/* The same for a handle the lookup did not know: which object it was. */
static inline int desc_unrecorded(pcache__desc_writer *w, const char *reason, VkObjectType type,
                                  uint64_t handle) {
  if (!w->buf->unhashable_reason) {
    w->buf->unhashable_object = (uint32_t)type;
    w->buf->unhashable_handle = handle;
  }
  return desc_unhashable(w, reason, 0);
}

/* The sType of the first struct of a pNext chain, 0 for none. */
static inline uint32_t pnext_stype(const void *chain) {
  return chain ? (uint32_t)((const VkBaseInStructure *)chain)->sType : 0;
}

/* Grows the buffer for extra more bytes; the slow path of room.
 * Returns 0, or -1 with w->err set. */
int pcache__desc_buf_grow(pcache__desc_writer *w, size_t extra);

/*
 * Each put finds room once for all it writes, writes through a local
 * pointer, and sets the size once: a byte store may alias anything, so
 * every store through the buffer made the compiler load the buffer's
 * fields again, and the room checks alone were a sixth of a description's
 * instructions.
 */

/* Where the next extra bytes go, or NULL once the description has failed
 * (w->err). */
static inline uint8_t *room(pcache__desc_writer *w, size_t extra) {
  pcache__desc_buf *b = w->buf;
  if (__builtin_expect(b->capacity - b->size >= extra && !w->err, 1))
    return b->data + b->size;
  if (pcache__desc_buf_grow(w, extra))
    return NULL;
  return b->data + b->size;
}

/* The bytes up to p are written. */
static inline void advance_to(pcache__desc_writer *w, const uint8_t *p) {
  w->buf->size = (size_t)(p - w->buf->data);
}

static inline uint8_t *varint_at(uint8_t *p, uint64_t v) {
  while (v >= 0x80) {
    *p++ = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uint8_t)v;
  return p;
}

static inline uint8_t *tag_at(uint8_t *p, uint32_t field, uint32_t wire_type) {
  return varint_at(p, (uint64_t)field << 3 | wire_type);
}

/* Room for a length-delimited field of size bytes with its tag and
 * length; past PCACHE_DESC_MAX_BYTES, the size alone, which room turns
 * into "too_large" without overflowing the sum. */
static inline size_t with_head(size_t size) {
  return size > PCACHE_DESC_MAX_BYTES ? size : size + 15;
}

static inline void raw_bytes(pcache__desc_writer *w, const void *data, size_t size) {
  uint8_t *p;
  if (size == 0 || !(p = room(w, size)))
    return;
  memcpy(p, data, size);
  advance_to(w, p + size);
}

/* A varint field: its tag and value, at most 5 + 10 bytes. */
static inline void put_varint_field(pcache__desc_writer *w, uint32_t field, uint64_t v) {
  uint8_t *p = room(w, 15);
  if (p)
    advance_to(w, varint_at(tag_at(p, field, WT_VARINT), v));
}

static inline void put_u32(pcache__desc_writer *w, uint32_t field, uint32_t v) {
  if (v)
    put_varint_field(w, field, v);
}

/* protobuf int32: negative values are sign-extended to ten bytes. */
static inline void put_i32(pcache__desc_writer *w, uint32_t field, int32_t v) {
  if (v)
    put_varint_field(w, field, (uint64_t)(int64_t)v);
}

static inline void put_bool(pcache__desc_writer *w, uint32_t field, VkBool32 v) {
  put_u32(w, field, v ? 1 : 0);
}

static inline uint8_t *float_at(uint8_t *p, float f) {
  uint32_t bits;
  memcpy(&bits, &f, 4);
  p[0] = (uint8_t)bits;
  p[1] = (uint8_t)(bits >> 8);
  p[2] = (uint8_t)(bits >> 16);
  p[3] = (uint8_t)(bits >> 24);
  return p + 4;
}

static inline void raw_float(pcache__desc_writer *w, float f) {
  uint8_t *p = room(w, 4);
  if (p)
    advance_to(w, float_at(p, f));
}

/* protobuf-c leaves out a float that compares equal to 0, -0.0 included. */
static inline void put_float(pcache__desc_writer *w, uint32_t field, float f) {
  uint8_t *p;
  if (f != 0.0f && (p = room(w, 9)))
    advance_to(w, float_at(tag_at(p, field, WT_FIXED32), f));
}

static inline void put_bytes(pcache__desc_writer *w, uint32_t field, const void *data,
                             size_t size) {
  uint8_t *p;
  if (!size || !(p = room(w, with_head(size))))
    return;
  p = varint_at(tag_at(p, field, WT_LEN), size);
  memcpy(p, data, size);
  advance_to(w, p + size);
}

/* A length-delimited field whose size is known only at its end: one length
 * byte is reserved, and the body moves when it turns out longer than 127. */
static inline size_t msg_begin(pcache__desc_writer *w, uint32_t field) {
  uint8_t *p = room(w, 6);
  if (!p)
    return 0;
  p = tag_at(p, field, WT_LEN);
  *p++ = 0;
  advance_to(w, p);
  return w->buf->size;
}

static inline void msg_end(pcache__desc_writer *w, size_t start) {
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
  if (!room(w, n - 1))
    return;
  p = w->buf->data + start;
  memmove(p + n - 1, p, len);
  p--;
  for (size_t v = len; v >= 0x80; v >>= 7)
    *p++ = (uint8_t)(v | 0x80);
  *p = (uint8_t)(len >> (7 * (n - 1)));
  w->buf->size += n - 1;
}

static inline void put_packed_u32(pcache__desc_writer *w, uint32_t field, const uint32_t *v,
                                  size_t n) {
  size_t m;
  if (!n)
    return;
  m = msg_begin(w, field);
  for (size_t i = 0; i < n; i++) {
    uint8_t *p = room(w, 10);
    if (!p)
      return;
    advance_to(w, varint_at(p, v[i]));
  }
  msg_end(w, m);
}

static inline void put_object(pcache__desc_writer *w, uint32_t field,
                              const pcache__desc_object *o) {
  uint8_t *p;
  if (!(p = room(w, with_head(o->encoded_size))))
    return;
  p = varint_at(tag_at(p, field, WT_LEN), o->encoded_size);
  memcpy(p, o->encoded, o->encoded_size);
  advance_to(w, p + o->encoded_size);
}

/* ------------------------------------------------------------ the reader */

/* The describer reads back a few fields of its own encodings: whether a
 * subpass has color and depth/stencil attachments, what a linked library
 * holds. A reader is the bytes left of one message. */
typedef struct reader {
  const uint8_t *p, *end;
} reader;

/* The next field: its number, its value (a varint's, or a length-delimited
 * field's length) and its body: a length-delimited one's bytes, else
 * empty, so a caller that expected a message where a varint stands reads
 * nothing rather than what an earlier field left. 0 or -1. */
static inline int rd_field(reader *r, uint32_t *ret_field, uint64_t *ret_value, reader *ret_body) {
  uint64_t tag;
  const uint8_t *body = NULL;
  ret_body->p = ret_body->end = r->p;
  if (pcache__wire_field(&r->p, r->end, &tag, ret_value, &body) < 0)
    return -1;
  *ret_field = (uint32_t)(tag >> 3);
  if ((tag & 7) == PCACHE_WIRE_LEN) {
    ret_body->p = body;
    ret_body->end = body + *ret_value;
  }
  return 0;
}

/* ------------------------------------------------------------ pipelines */

/* Flags that change neither what the driver builds nor what the app may
 * do with the pipeline: how the call behaves (compile-required, early
 * return), and that a base was named (a hint; the result is the same
 * pipeline). ALLOW_DERIVATIVES is hashed: only a pipeline made with it may
 * be a base. The audit of every flag is in docs/pipeline-desc.md. */
#define IGNORED_PIPELINE_FLAGS                                                                     \
  (VK_PIPELINE_CREATE_DERIVATIVE_BIT | VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT |  \
   VK_PIPELINE_CREATE_EARLY_RETURN_ON_FAILURE_BIT)

/* Writes the shader stages (field 4), sorted by stage bit, and their
 * stage bits to *ret_stage_mask. Returns 0 or PCACHE_EUNHASHABLE. */
int pcache__desc_put_stages(pcache__desc_writer *w, const VkPipelineShaderStageCreateInfo *stages,
                            uint32_t count, const pcache__desc_lookup *lookup,
                            uint32_t *ret_stage_mask);
/* The state hash over the whole buffer, and the tier-1 key over its
 * global part [global_start, global_end) seeded with the sample count. */
void pcache__desc_finish_keys(pcache__desc_writer *w, size_t global_start, size_t global_end,
                              uint32_t samples, pcache__desc_keys *ret_keys);

/* ------------------------------------------------------------ state */

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

/* The most dynamic states a create info may name. */
#define PCACHE__DESC_MAX_DYNAMIC 64

/* desc_state.c: a graphics pipeline's fixed-function state, each struct
 * without what dyn (DYN_* bits) leaves dynamic. Each returns 0 or
 * PCACHE_EUNHASHABLE (a pNext struct or value the describer does not
 * take). */

/* The dynamic states, sorted and without duplicates, into list (and those
 * the describer acts on as bits). */
int pcache__desc_read_dynamic(pcache__desc_writer *w, const VkPipelineDynamicStateCreateInfo *d,
                              uint32_t list[PCACHE__DESC_MAX_DYNAMIC], uint32_t *ret_n,
                              uint32_t *ret_dyn);
/* The vertex input part: vertex input and input assembly state. */
int pcache__desc_put_vertex_part(pcache__desc_writer *w, const VkGraphicsPipelineCreateInfo *info,
                                 uint32_t dyn);
int pcache__desc_put_tessellation(pcache__desc_writer *w,
                                  const VkPipelineTessellationStateCreateInfo *ts, uint32_t dyn);
int pcache__desc_put_viewport(pcache__desc_writer *w, const VkPipelineViewportStateCreateInfo *vp,
                              uint32_t dyn);
int pcache__desc_put_rasterization(pcache__desc_writer *w,
                                   const VkPipelineRasterizationStateCreateInfo *rs, uint32_t dyn);
int pcache__desc_put_multisample(pcache__desc_writer *w,
                                 const VkPipelineMultisampleStateCreateInfo *ms);
int pcache__desc_put_depth_stencil(pcache__desc_writer *w,
                                   const VkPipelineDepthStencilStateCreateInfo *ds, uint32_t dyn);
int pcache__desc_put_color_blend(pcache__desc_writer *w,
                                 const VkPipelineColorBlendStateCreateInfo *cb, uint32_t dyn);

/* ------------------------------------------------------------ libraries */

#define PART_VERTEX_INPUT VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT
#define PART_PRE_RASTER VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT
#define PART_FRAGMENT VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT
#define PART_OUTPUT VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT

/* What a graphics create info says of pipeline libraries (desc_library.c). */
typedef struct pcache__desc_gpl {
  int gpl;        /* a library, or linked from libraries: described by part */
  uint32_t parts; /* what the create info carries itself (all for a complete one) */
  uint32_t n_libraries;
  const pcache__desc_object *libraries[PCACHE_DESC_MAX_LIBRARIES];
  /* From the libraries' descriptions, the libraries they link included: */
  uint32_t stage_mask, n_stages;
  int discard; /* a pre-rasterization part statically discards */
} pcache__desc_gpl;

/* Reads info's library structs and looks up (and reads) the libraries it
 * links. Returns 0 or PCACHE_EUNHASHABLE. */
int pcache__desc_gpl_scan(pcache__desc_writer *w, const VkGraphicsPipelineCreateInfo *info,
                          const pcache__desc_lookup *lookup, pcache__desc_gpl *ret_gpl);
/* Writes library_parts and the libraries (fields 18 and 19): nothing for a
 * complete pipeline. */
void pcache__desc_put_gpl(pcache__desc_writer *w, const pcache__desc_gpl *gpl);

#endif
