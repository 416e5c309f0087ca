/* A generator of N distinct, realistic pipelines for the benchmarks.
 *
 * Shader sets: an unlit pair, a PBR pair whose fragment shader loops over
 * 4 to 32 lights (with clear coat, parallax occlusion and PCF shadows, as a
 * production uber-shader does), and three compute kernels (blur, reduction,
 * particles). Variants
 * come from specialization constants, blend mode, topology, colour and
 * depth formats, sample count, and render pass vs dynamic rendering, as an
 * engine's permutations do. Pipeline i is the same in every process and
 * every mode, so a fill run and a measure run build identical state.
 *
 * Objects (shader modules, set layouts, pipeline layouts, render passes)
 * are made through the libpcache wrappers when a pcache_device is given, so
 * the pipelines are hashable; with NULL they are made with plain vkCreate*
 * on the same code path, for the baselines that do not use pcache. */
#ifndef PCACHE_BENCH_PIPESET_H
#define PCACHE_BENCH_PIPESET_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#include <pcache/pcache.h>

/* One Vulkan 1.3 (or the best available) instance and device. */
typedef struct bench_vk {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  uint32_t api_version;
  int dynamic_rendering;   /* the feature is enabled on the device */
  int creation_feedback;   /* VkPipelineCreationFeedback is available */
  int cache_control;       /* pipelineCreationCacheControl is enabled */
  VkPhysicalDeviceProperties props;
  VkPhysicalDeviceDriverProperties driver; /* zeroed when unavailable */
} bench_vk;

/* Creates the instance and device of physical device index (env
 * PCACHE_BENCH_DEVICE, default 0). Dies on failure. */
void bench_vk_init(bench_vk *vk, const char *app_name);
void bench_vk_fini(bench_vk *vk);

/* Prints device_name, vendor_id, device_id, driver_id, driver_name,
 * driver_info, api_version and driver_kind (nvidia, mesa, other) lines. */
void bench_vk_print(const bench_vk *vk);

typedef struct bench_pipeset bench_pipeset;

/* Builds the create infos of pipelines [0, n) and the objects they use.
 * pdev NULL: plain vkCreate* for the objects. Dies on failure. */
bench_pipeset *bench_pipeset_create(const bench_vk *vk, pcache_device *pdev, uint32_t n);
void bench_pipeset_destroy(bench_pipeset *set);

uint32_t bench_pipeset_count(const bench_pipeset *set);
/* 1 when pipeline i is a compute pipeline. */
int bench_pipeset_is_compute(const bench_pipeset *set, uint32_t i);
/* The create info of pipeline i (pNext may hold VkPipelineRenderingCreateInfo).
 * Valid until the set is destroyed. */
const VkGraphicsPipelineCreateInfo *bench_pipeset_graphics(const bench_pipeset *set, uint32_t i);
const VkComputePipelineCreateInfo *bench_pipeset_compute(const bench_pipeset *set, uint32_t i);
/* A short description of pipeline i ("pbr l4 nm rp rgba16f x4 blend=alpha ..."). */
const char *bench_pipeset_name(const bench_pipeset *set, uint32_t i);

#endif
