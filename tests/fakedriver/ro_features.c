/* ro_features: a program whose device features struct is const, in
 * read-only memory (a static const struct with no pointers lands in
 * .rodata), with pipelineCreationCacheControl off. The layer must enable
 * the feature it needs without writing the program's struct (it once did,
 * and the program died of SIGSEGV), and then ask the driver first on that
 * device. It makes one compute pipeline and exits 0; driver_first_test.sh
 * reads the layer's report. */
#include <stdio.h>
#include <vulkan/vulkan.h>

#include "ro_shaders.h"

static const VkPhysicalDeviceVulkan13Features features13 = {
    .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
    .pipelineCreationCacheControl = VK_FALSE};

int main(void) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "ro-features",
                           .apiVersion = VK_API_VERSION_1_3};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkInstance instance;
  VkPhysicalDevice pd;
  VkDevice device;
  uint32_t n = 1;
  float prio = 1.0f;
  VkResult vr;
  if (vkCreateInstance(&ici, NULL, &instance) != VK_SUCCESS)
    return 2;
  if (vkEnumeratePhysicalDevices(instance, &n, &pd) < 0 || n == 0)
    return 2;
  VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                               .queueCount = 1,
                               .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &features13,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &q};
  vr = vkCreateDevice(pd, &dci, NULL, &device);
  printf("create_device=%d\n", (int)vr);
  if (vr != VK_SUCCESS)
    return 1;
  VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = sizeof ro_shaders_fill_comp,
                                  .pCode = ro_shaders_fill_comp};
  VkDescriptorSetLayoutBinding binding = {.binding = 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo sci = {.sType =
                                             VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                         .bindingCount = 1,
                                         .pBindings = &binding};
  VkDescriptorSetLayout set_layout;
  VkPipelineLayoutCreateInfo lci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                    .setLayoutCount = 1,
                                    .pSetLayouts = &set_layout};
  VkShaderModule module;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  if (vkCreateShaderModule(device, &mci, NULL, &module) != VK_SUCCESS ||
      vkCreateDescriptorSetLayout(device, &sci, NULL, &set_layout) != VK_SUCCESS ||
      vkCreatePipelineLayout(device, &lci, NULL, &layout) != VK_SUCCESS)
    return 1;
  VkComputePipelineCreateInfo cci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main"},
      .layout = layout,
      .basePipelineIndex = -1};
  vr = vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &cci, NULL, &pipeline);
  printf("create_pipeline=%d\n", (int)vr);
  if (vr == VK_SUCCESS)
    vkDestroyPipeline(device, pipeline, NULL);
  vkDestroyPipelineLayout(device, layout, NULL);
  vkDestroyDescriptorSetLayout(device, set_layout, NULL);
  vkDestroyShaderModule(device, module, NULL);
  vkDestroyDevice(device, NULL);
  vkDestroyInstance(instance, NULL);
  return vr == VK_SUCCESS ? 0 : 1;
}
