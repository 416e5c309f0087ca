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
typedef struct pcache_desc_object {
  pcache_hash128 hash;
  uint8_t *encoded;
  size_t encoded_size;
} pcache_desc_object;

void pcache__desc_object_free(pcache_desc_object *object);

/* How the describer finds the content of the handles a create info names.
 * Each returns NULL for a handle not made through a wrapper; that makes
 * the pipeline unhashable. */
typedef struct pcache_desc_lookup {
  void *ctx;
  const pcache_desc_object *(*shader_module)(void *ctx, VkShaderModule module);
  const pcache_desc_object *(*set_layout)(void *ctx, VkDescriptorSetLayout layout);
  const pcache_desc_object *(*pipeline_layout)(void *ctx, VkPipelineLayout layout);
  const pcache_desc_object *(*render_pass)(void *ctx, VkRenderPass render_pass);
  const pcache_desc_object *(*sampler)(void *ctx, VkSampler sampler);
} pcache_desc_lookup;

/*
 * Object encoders, called by the wrappers. Return 0, -ENOMEM, or
 * PCACHE_EUNHASHABLE (a pNext the library does not know, or an immutable
 * sampler not made through a wrapper). The shader module's hash is XXH3-128
 * of its SPIR-V code.
 */
int pcache__desc_shader_module(const VkShaderModuleCreateInfo *info,
                               pcache_desc_object **ret_object);
int pcache__desc_sampler(const VkSamplerCreateInfo *info, pcache_desc_object **ret_object);
int pcache__desc_set_layout(const VkDescriptorSetLayoutCreateInfo *info,
                            const pcache_desc_lookup *lookup, pcache_desc_object **ret_object);
int pcache__desc_pipeline_layout(const VkPipelineLayoutCreateInfo *info,
                                 const pcache_desc_lookup *lookup,
                                 pcache_desc_object **ret_object);
int pcache__desc_render_pass(const VkRenderPassCreateInfo *info, pcache_desc_object **ret_object);
int pcache__desc_render_pass2(const VkRenderPassCreateInfo2 *info,
                              pcache_desc_object **ret_object);

/* A growable output buffer that starts on the caller's stack, so the hit
 * path allocates nothing. */
typedef struct pcache_desc_buf {
  uint8_t *data;
  size_t size, capacity;
  int heap; /* data was malloc'ed */
  uint8_t inline_storage[2048];
} pcache_desc_buf;

void pcache__desc_buf_init(pcache_desc_buf *buf);
void pcache__desc_buf_release(pcache_desc_buf *buf);

typedef struct pcache_desc_keys {
  pcache_hash128 state_hash; /* XXH3-128 of the canonical bytes */
  uint64_t tier1_key;        /* hash of the global part (formats, samples, view mask,
                                render pass compatibility) */
} pcache_desc_keys;

/*
 * pcache__desc_graphics / pcache__desc_compute - describe a create info
 * into buf (the canonical PipelineDesc bytes) and compute its keys.
 * Returns 0, -ENOMEM, or PCACHE_EUNHASHABLE (unknown pNext anywhere in the
 * chain that would change the compiled code, or a handle no wrapper made).
 * Thread-safe; never takes a lock.
 */
int pcache__desc_graphics(const VkGraphicsPipelineCreateInfo *info,
                          const pcache_desc_lookup *lookup, pcache_desc_buf *buf,
                          pcache_desc_keys *ret_keys);
int pcache__desc_compute(const VkComputePipelineCreateInfo *info,
                         const pcache_desc_lookup *lookup, pcache_desc_buf *buf,
                         pcache_desc_keys *ret_keys);

/* ------------------------------------------------------------ decoding
 *
 * A stored description turned back into Vulkan create infos, so an entry
 * can be rebuilt against another driver (replay). The decoder makes the
 * create infos of every object the pipeline needs; the handles start as
 * VK_NULL_HANDLE and are made by pcache__desc_decoded_create_objects (or
 * filled in by the caller, then pcache__desc_decoded_link). */

/* Gives the SPIR-V code whose XXH3-128 is hash: *ret_code must stay valid
 * until the decoded description is freed. Returns 0 or a negative code
 * (PCACHE_EMISSING_MODULE when it has none). */
typedef int (*pcache_desc_code_fn)(void *ctx, const pcache_hash128 *hash,
                                   const uint32_t **ret_code, size_t *ret_size);

typedef struct pcache_desc_decoded {
  uint32_t kind; /* 1 graphics, 2 compute (Pcachepb__EntryKind) */
  /* In creation order: samplers, set layouts, pipeline layout, render pass,
   * modules. Arrays have n_* entries; immutable sampler and set layout
   * pointers in the infos point into samplers[] and set_layouts[]. */
  uint32_t n_samplers;
  VkSamplerCreateInfo *sampler_infos;
  VkSampler *samplers;
  uint32_t n_set_layouts;
  VkDescriptorSetLayoutCreateInfo *set_layout_infos;
  VkDescriptorSetLayout *set_layouts;
  VkPipelineLayoutCreateInfo layout_info;
  VkPipelineLayout layout;
  int has_render_pass;
  VkRenderPassCreateInfo2 render_pass_info;
  VkRenderPass render_pass;
  uint32_t n_modules; /* one per stage, in stage order */
  pcache_hash128 *module_hashes;
  VkShaderModuleCreateInfo *module_infos; /* codeSize 0 when code was NULL */
  VkShaderModule *modules;
  VkGraphicsPipelineCreateInfo graphics; /* kind 1 */
  VkComputePipelineCreateInfo compute;   /* kind 2 */
  struct pcache__desc_arena *arena;
} pcache_desc_decoded;

/*
 * pcache__desc_decode - parse desc (a packed PipelineDesc of this format
 * version) into create infos. code may be NULL (the module infos then have
 * no code: enough to describe, not to create). Returns 0, -ENOMEM,
 * PCACHE_EBAD_DESC, or what code returned. Allocation is bounded by 16 KiB
 * plus a small multiple of size. Thread-safe. Free with
 * pcache__desc_decoded_free.
 */
int pcache__desc_decode(const uint8_t *desc, size_t size, pcache_desc_code_fn code,
                        void *code_ctx, pcache_desc_decoded **ret_decoded);
/* Copies the object handles into the pipeline create info (stage modules,
 * layout, render pass). */
void pcache__desc_decoded_link(pcache_desc_decoded *decoded);
/* Creates every object on device, then links. Returns 0,
 * PCACHE_EMISSING_MODULE (decoded without code), -ENOMEM or -EIO (the
 * driver refused an object; what was made is destroyed again). */
int pcache__desc_decoded_create_objects(pcache_desc_decoded *decoded, VkDevice device,
                                        const VkAllocationCallbacks *alloc);
/* Creates the pipeline itself (after create_objects). Returns 0, -ENOMEM
 * or -EIO (the driver refused it). */
int pcache__desc_decoded_create_pipeline(const pcache_desc_decoded *decoded, VkDevice device,
                                         VkPipelineCache cache,
                                         const VkAllocationCallbacks *alloc,
                                         VkPipeline *ret_pipeline);
/* Destroys the objects create_objects made (not the pipeline). */
void pcache__desc_decoded_destroy_objects(pcache_desc_decoded *decoded, VkDevice device,
                                          const VkAllocationCallbacks *alloc);
void pcache__desc_decoded_free(pcache_desc_decoded *decoded);

#endif
