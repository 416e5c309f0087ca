/* What bench_gpl's two measures share: the Vulkan instance, the demo's
 * objects, the target's size, timing. A header of its own, under both
 * bench_gpl.c (the misses, which runs the draw measure) and
 * bench_gpl_draw.c (the draw cost), so neither reaches up into the other
 * for them. */
#ifndef PCACHE_BENCH_GPL_COMMON_H
#define PCACHE_BENCH_GPL_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <vulkan/vulkan.h>

#include <pcache/pcache.h>

#define W 256
#define GRID 64
#define DEPTH_FORMAT VK_FORMAT_D32_SFLOAT

#define CHECK(call)                                                                                \
  do {                                                                                             \
    VkResult vr_ = (call);                                                                         \
    if (vr_ != VK_SUCCESS) {                                                                       \
      fprintf(stderr, "bench_gpl: %s: VkResult %d\n", #call, (int)vr_);                            \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct vk {
  VkInstance instance;
  VkPhysicalDevice phys;
  uint32_t family;
  float timestamp_period;
} vk_t;

/* The demo's objects, through pcache's wrappers. */
typedef struct objects {
  VkShaderModule vert, frag;
  VkSampler sampler;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkRenderPass pass;
} objects;

#endif
