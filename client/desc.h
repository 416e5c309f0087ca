/* Pipeline descriptions: the canonical, handle-free form of a pipeline's
 * state (docs/pipeline-desc.md), the state hash over it, and the tier keys.
 *
 * The canonical form is a packed Pcachepb__PipelineDesc, written directly
 * (not through protobuf-c's packer, which is too slow for the hit path) in
 * field-number order, omitting proto3 defaults, so that protobuf-c's own
 * pack of the unpacked message gives the same bytes. */
#ifndef PCACHE_CLIENT_DESC_H
#define PCACHE_CLIENT_DESC_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "common/hash.h"

/* Bumped whenever the canonical form changes: part of every state hash. */
#define PCACHE_DESC_FORMAT_VERSION 1

/* An object's content, made once when the app creates the object through a
 * wrapper: its hash and its canonical encoding (a packed sub-message of
 * PipelineDesc that pipeline descriptions embed). */
typedef struct pcache__desc_object {
  pcache__hash hash;
  uint8_t *encoded;
  size_t encoded_size;
} pcache__desc_object;

void pcache__desc_object_free(pcache__desc_object *object);

/* How the describer finds the content of the handles a create info names.
 * Each returns NULL for a handle not made through a wrapper; that makes
 * the pipeline unhashable. */
typedef struct pcache__desc_lookup {
  void *ctx;
  const pcache__desc_object *(*shader_module)(void *ctx, VkShaderModule module);
  const pcache__desc_object *(*set_layout)(void *ctx, VkDescriptorSetLayout layout);
  const pcache__desc_object *(*pipeline_layout)(void *ctx, VkPipelineLayout layout);
  const pcache__desc_object *(*render_pass)(void *ctx, VkRenderPass render_pass);
  const pcache__desc_object *(*sampler)(void *ctx, VkSampler sampler);
  /* A graphics pipeline library: its own description (the bytes its state
   * hash was taken over), which a pipeline linking it embeds. */
  const pcache__desc_object *(*pipeline_library)(void *ctx, VkPipeline library);
} pcache__desc_lookup;

/*
 * Object encoders, called by the wrappers. Return 0, -ENOMEM, or
 * PCACHE_EUNHASHABLE (a pNext the library does not know, or an immutable
 * sampler not made through a wrapper). The shader module's hash is XXH3-128
 * of its SPIR-V code.
 */
int pcache__desc_shader_module(const VkShaderModuleCreateInfo *info,
                               pcache__desc_object **ret_object);
int pcache__desc_sampler(const VkSamplerCreateInfo *info, pcache__desc_object **ret_object);
int pcache__desc_set_layout(const VkDescriptorSetLayoutCreateInfo *info,
                            const pcache__desc_lookup *lookup, pcache__desc_object **ret_object);
int pcache__desc_pipeline_layout(const VkPipelineLayoutCreateInfo *info,
                                 const pcache__desc_lookup *lookup,
                                 pcache__desc_object **ret_object);
int pcache__desc_render_pass(const VkRenderPassCreateInfo *info, pcache__desc_object **ret_object);
int pcache__desc_render_pass2(const VkRenderPassCreateInfo2 *info,
                              pcache__desc_object **ret_object);

/* A growable output buffer that starts on the caller's stack, so the hit
 * path allocates nothing. */
/* The most a description may take: past it the pipeline is unhashable
 * ("too_large"; docs/pipeline-desc.md). */
#define PCACHE_DESC_MAX_BYTES ((size_t)128 << 20)

typedef struct pcache__desc_buf {
  uint8_t *data;
  size_t size, capacity;
  int heap; /* data was malloc'ed */
  /* Why the description failed with PCACHE_EUNHASHABLE: a word
   * (docs/layer.md lists them) and the sType of the struct that caused it,
   * 0 when no struct did, and the object the pipeline names that no
   * wrapper recorded (its VkObjectType and handle, 0 when none did).
   * Static strings; set by the first failure. */
  const char *unhashable_reason;
  uint32_t unhashable_stype;
  uint32_t unhashable_object; /* VkObjectType */
  uint64_t unhashable_handle;
  uint8_t inline_storage[2048];
} pcache__desc_buf;

void pcache__desc_buf_init(pcache__desc_buf *buf);
void pcache__desc_buf_release(pcache__desc_buf *buf);

typedef struct pcache__desc_keys {
  pcache__hash state_hash;   /* XXH3-128 of the canonical bytes */
  uint64_t tier1_key;        /* hash of the global part (formats, samples, view mask,
                                render pass compatibility) */
} pcache__desc_keys;

/*
 * pcache__desc_graphics / pcache__desc_compute - describe a create info
 * into buf (the canonical PipelineDesc bytes) and compute its keys.
 * Returns 0, -ENOMEM, or PCACHE_EUNHASHABLE (unknown pNext anywhere in the
 * chain that would change the compiled code, or a handle no wrapper made).
 * Thread-safe; never takes a lock.
 */
int pcache__desc_graphics(const VkGraphicsPipelineCreateInfo *info,
                          const pcache__desc_lookup *lookup, pcache__desc_buf *buf,
                          pcache__desc_keys *ret_keys);
int pcache__desc_compute(const VkComputePipelineCreateInfo *info, const pcache__desc_lookup *lookup,
                         pcache__desc_buf *buf, pcache__desc_keys *ret_keys);

/* The parts of a graphics pipeline (VkGraphicsPipelineLibraryFlagsEXT) that
 * info carries itself: all four for a complete pipeline; for a pipeline
 * library or a pipeline linked from libraries, its
 * VkGraphicsPipelineLibraryCreateInfoEXT's flags, or none. State of other
 * parts is ignored by the driver, and may be garbage. Reads only the pNext
 * chain. */
#define PCACHE_DESC_ALL_PARTS                                                                      \
  (VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT |                                   \
   VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT |                                \
   VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT |                                          \
   VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT)
uint32_t pcache__desc_graphics_parts(const VkGraphicsPipelineCreateInfo *info);

/*
 * pcache__desc_pipeline_library - the object a graphics pipeline library is
 * recorded as, once built: its description (desc, as pcache__desc_graphics
 * wrote it) and state hash, for the pipelines that link it to embed.
 * Returns 0 or -ENOMEM.
 */
int pcache__desc_pipeline_library(const pcache__desc_buf *desc, const pcache__desc_keys *keys,
                                  pcache__desc_object **ret_object);

#endif
