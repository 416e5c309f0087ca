/* vk_leak_probe.c - the Vulkan work pcache's tests do, with no pcache code at
 * all: an instance and device on the CPU driver, a pipeline cache, a compute
 * pipeline and its cache data, then everything destroyed in order.
 *
 * Built only in AddressSanitizer builds. Run it with LeakSanitizer and no
 * suppressions: any leak it reports belongs to the driver (or the loader or
 * LLVM), because nothing else runs. scripts/test.sh runs it before the ASan
 * suite to print the installed driver's own leaks, and its failure message
 * points here when a leak has no pcache frame. docs/testing.md explains. */
#include <stdio.h>
#include <stdlib.h>
#include <vulkan/vulkan.h>

#include "test_shaders.h"

#define CHECK(expr)                                                                                \
  do {                                                                                             \
    VkResult r_ = (expr);                                                                          \
    if (r_ != VK_SUCCESS) {                                                                        \
      fprintf(stderr, "vk_leak_probe: %s: VkResult %d\n", #expr, (int)r_);                        \
      return 2;                                                                                    \
    }                                                                                              \
  } while (0)

int main(void) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "pcache-vk-leak-probe",
                           .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkInstance instance;
  VkPhysicalDevice devices[8], phys;
  VkPhysicalDeviceProperties props;
  uint32_t n = 8;
  float priority = 1.0f;

  CHECK(vkCreateInstance(&ici, NULL, &instance));
  CHECK(vkEnumeratePhysicalDevices(instance, &n, devices));
  if (n == 0) {
    fprintf(stderr, "vk_leak_probe: no Vulkan device\n");
    return 2;
  }
  phys = devices[0];
  for (uint32_t i = 0; i < n; i++) {
    vkGetPhysicalDeviceProperties(devices[i], &props);
    if (props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
      phys = devices[i];
  }
  vkGetPhysicalDeviceProperties(phys, &props);

  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = 0,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  VkDevice device;
  CHECK(vkCreateDevice(phys, &dci, NULL, &device));

  VkPipelineCacheCreateInfo pcci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache cache;
  CHECK(vkCreatePipelineCache(device, &pcci, NULL, &cache));

  VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = sizeof test_shaders_fill_comp,
                                   .pCode = test_shaders_fill_comp};
  VkShaderModule module;
  CHECK(vkCreateShaderModule(device, &smci, NULL, &module));

  VkDescriptorSetLayoutBinding binding = {.binding = 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo dslci = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 1,
      .pBindings = &binding};
  VkDescriptorSetLayout set_layout;
  CHECK(vkCreateDescriptorSetLayout(device, &dslci, NULL, &set_layout));
  VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &set_layout};
  VkPipelineLayout layout;
  CHECK(vkCreatePipelineLayout(device, &plci, NULL, &layout));

  VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main"},
      .layout = layout};
  VkPipeline pipeline;
  CHECK(vkCreateComputePipelines(device, cache, 1, &cpci, NULL, &pipeline));

  size_t size = 0;
  CHECK(vkGetPipelineCacheData(device, cache, &size, NULL));
  void *data = malloc(size ? size : 1);
  if (!data)
    return 2;
  CHECK(vkGetPipelineCacheData(device, cache, &size, data));
  free(data);

  vkDestroyPipeline(device, pipeline, NULL);
  vkDestroyPipelineLayout(device, layout, NULL);
  vkDestroyDescriptorSetLayout(device, set_layout, NULL);
  vkDestroyShaderModule(device, module, NULL);
  vkDestroyPipelineCache(device, cache, NULL);
  vkDestroyDevice(device, NULL);
  vkDestroyInstance(instance, NULL);
  printf("vk_leak_probe: %s (driver version 0x%x): done\n", props.deviceName,
         props.driverVersion);
  return 0;
}
