/* Vulkan for tests: an instance and device on lavapipe (the CPU driver),
 * objects made through libpcache's wrappers, and create infos for graphics
 * and compute pipelines in numbered variants. Everything aborts on failure.
 * Call test_env_init first: the loader needs XDG_RUNTIME_DIR. */
#ifndef PCACHE_TESTS_VK_H
#define PCACHE_TESTS_VK_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include <pcache/pcache.h>

typedef struct test_vk {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  uint32_t queue_family;
  int creation_feedback; /* VK_EXT_pipeline_creation_feedback or 1.3 */
  uint32_t api_version;  /* what the instance was created with */
  VkPhysicalDeviceProperties props;
} test_vk;

void test_vk_init(test_vk *vk);
/* The same with VK_EXT_graphics_pipeline_library enabled: 1, or 0 (nothing
 * made, vk zeroed) when the device lacks it. */
int test_vk_init_gpl(test_vk *vk);
void test_vk_fini(test_vk *vk);
/* The pcache_device_info for vk (loader's vkGetInstanceProcAddr). */
pcache_device_info test_vk_device_info(const test_vk *vk);

/* The SPIR-V of a test shader ("tri.vert", "tri.frag", "fill.comp"). */
const uint32_t *test_vk_shader_code(const char *name, size_t *ret_size);

/* Objects the test pipelines use, made through pcache's wrappers so that
 * pipelines naming them are hashable. */
typedef struct test_objects {
  pcache_device *device; /* NULL: made with plain Vulkan on vk_device */
  VkDevice vk_device;
  VkShaderModule vert, frag, comp;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkRenderPass render_pass;
} test_objects;

void test_objects_create(test_objects *objects, pcache_device *device);
/* The same objects made with plain Vulkan, as a program that knows nothing
 * of pcache makes them (the layer tests). */
void test_objects_create_plain(test_objects *objects, VkDevice device);
void test_objects_destroy(test_objects *objects);

/* A graphics create info and the structures it points at. Do not copy it
 * (it points into itself). Variants: bit 0 topology (list/strip), bit 1
 * blending, bits 2.. a specialization constant; every variant number gives
 * a different state hash. */
typedef struct test_graphics {
  VkGraphicsPipelineCreateInfo info;
  VkPipelineShaderStageCreateInfo stages[2];
  VkSpecializationMapEntry spec_entry;
  VkSpecializationInfo spec;
  float spec_value;
  VkPipelineVertexInputStateCreateInfo vertex_input;
  VkPipelineInputAssemblyStateCreateInfo input_assembly;
  VkPipelineViewportStateCreateInfo viewport;
  VkPipelineRasterizationStateCreateInfo raster;
  VkPipelineMultisampleStateCreateInfo multisample;
  VkPipelineColorBlendAttachmentState blend_attachment;
  VkPipelineColorBlendStateCreateInfo blend;
  VkDynamicState dynamic_states[2];
  VkPipelineDynamicStateCreateInfo dynamic;
} test_graphics;

void test_graphics_info(test_graphics *g, const test_objects *objects, uint32_t variant);

/* What a plain program does in a layer test's child process: the Vulkan
 * device (into vk), the objects made with plain Vulkan, and graphics
 * pipeline variant; the child exits 3 when the driver refuses it. All of
 * it is left alive: how the program ends is the caller's test. */
void test_plain_program_pipeline(test_vk *vk, uint32_t variant);

/* A compute create info; the variant is its specialization constant. */
typedef struct test_compute {
  VkComputePipelineCreateInfo info;
  VkSpecializationMapEntry spec_entry;
  VkSpecializationInfo spec;
  uint32_t spec_value;
} test_compute;

void test_compute_info(test_compute *c, const test_objects *objects, uint32_t variant);

/* Graphics pipeline libraries (VK_EXT_graphics_pipeline_library): the four
 * part libraries of test_graphics_info's pipeline of the same variant (in
 * the order vertex input, pre-rasterization, fragment shader, fragment
 * output; each may be linked with link-time optimization), and a pipeline
 * linked from four of them. Do not copy it (it points into itself). */
#define TEST_GPL_PARTS 4
typedef struct test_gpl {
  test_graphics g;
  VkGraphicsPipelineLibraryCreateInfoEXT parts[TEST_GPL_PARTS];
  VkGraphicsPipelineCreateInfo library[TEST_GPL_PARTS];
  VkPipeline libraries[TEST_GPL_PARTS];
  VkPipelineLibraryCreateInfoKHR link;
  VkGraphicsPipelineCreateInfo linked;
} test_gpl;

void test_gpl_info(test_gpl *t, const test_objects *objects, uint32_t variant);
/* t->linked: libraries linked, with flags (0, or link-time optimization). */
void test_gpl_link(test_gpl *t, const VkPipeline libraries[TEST_GPL_PARTS],
                   VkPipelineCreateFlags flags);

#endif
