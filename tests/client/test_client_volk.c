/* libpcache in an app in the style of volk (issue 15): it does not link
 * libvulkan, loads it with dlopen, and keeps the entry points in globals
 * named exactly like Vulkan's functions, which the executable exports
 * (libpcache.so is linked to it). Following the README, the app leaves
 * pcache_device_info.get_instance_proc_addr NULL. A libpcache that named
 * vkGetInstanceProcAddr would be bound to the global variable and call
 * data: the crash the issue reports. This one must find the loader itself
 * (client/loader.c), and build a compute pipeline through it. */
#include <dlfcn.h>
#include <stdio.h>

/* As volk does: declarations of the function types only. */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include <pcache/pcache.h>

#include "harness.h"
#include "test.h"
#include "volk_shaders.h"

/* The globals, as volk declares them (every name libpcache could want). */
PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
PFN_vkCreateInstance vkCreateInstance;
PFN_vkDestroyInstance vkDestroyInstance;
PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices;
PFN_vkGetPhysicalDeviceProperties vkGetPhysicalDeviceProperties;
PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2;
PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties;
PFN_vkCreateDevice vkCreateDevice;
PFN_vkDestroyDevice vkDestroyDevice;
PFN_vkCreatePipelineCache vkCreatePipelineCache;
PFN_vkDestroyPipelineCache vkDestroyPipelineCache;
PFN_vkGetPipelineCacheData vkGetPipelineCacheData;
PFN_vkMergePipelineCaches vkMergePipelineCaches;
PFN_vkCreateComputePipelines vkCreateComputePipelines;
PFN_vkCreateGraphicsPipelines vkCreateGraphicsPipelines;
PFN_vkDestroyPipeline vkDestroyPipeline;
PFN_vkCreateShaderModule vkCreateShaderModule;
PFN_vkDestroyShaderModule vkDestroyShaderModule;

#define LOAD_I(inst, name)                                                                         \
  ASSERT_TRUE((name = (PFN_##name)vkGetInstanceProcAddr(inst, #name)) != NULL)
#define LOAD_D(dev, name) ASSERT_TRUE((name = (PFN_##name)vkGetDeviceProcAddr(dev, #name)) != NULL)

int main(void) {
  test_env env;
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "volk-style",
                           .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkInstance instance;
  VkPhysicalDevice pds[8];
  uint32_t n = 8;
  float priority = 1.0f;
  VkDevice device;
  void *lib;

  test_env_init(&env, "client-volk");
  lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(lib != NULL);
  vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
  ASSERT_TRUE(vkGetInstanceProcAddr != NULL);
  LOAD_I(NULL, vkCreateInstance);
  ASSERT_VK(vkCreateInstance(&ici, NULL, &instance));
  LOAD_I(instance, vkDestroyInstance);
  LOAD_I(instance, vkEnumeratePhysicalDevices);
  LOAD_I(instance, vkGetPhysicalDeviceProperties);
  LOAD_I(instance, vkGetPhysicalDeviceProperties2);
  LOAD_I(instance, vkGetPhysicalDeviceQueueFamilyProperties);
  LOAD_I(instance, vkCreateDevice);
  LOAD_I(instance, vkGetDeviceProcAddr);
  ASSERT_VK(vkEnumeratePhysicalDevices(instance, &n, pds));
  ASSERT_GT(n, 0);
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = 0,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  ASSERT_VK(vkCreateDevice(pds[0], &dci, NULL, &device));
  LOAD_D(device, vkDestroyDevice);
  LOAD_D(device, vkCreatePipelineCache);
  LOAD_D(device, vkDestroyPipelineCache);
  LOAD_D(device, vkGetPipelineCacheData);
  LOAD_D(device, vkMergePipelineCaches);
  LOAD_D(device, vkCreateComputePipelines);
  LOAD_D(device, vkCreateGraphicsPipelines);
  LOAD_D(device, vkDestroyPipeline);
  LOAD_D(device, vkCreateShaderModule);
  LOAD_D(device, vkDestroyShaderModule);

  /* The README's way: no get_instance_proc_addr. */
  pcache_device_info info = PCACHE_STRUCT_INIT(pcache_device_info);
  pcache_device *pdev;
  VkResult vr = VK_ERROR_UNKNOWN;
  info.instance = instance;
  info.physical_device = pds[0];
  info.device = device;
  info.instance_api_version = app.apiVersion;
  info.ret_vk_result = &vr;
  ASSERT_OK(pcache_device_create(NULL, &info, &pdev));
  ASSERT_EQ(vr, VK_SUCCESS);

  VkShaderModule module;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = sizeof volk_shaders_fill_comp,
                                   .pCode = volk_shaders_fill_comp};
  VkDescriptorSetLayoutBinding binding = {.binding = 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
  VkDescriptorSetLayoutCreateInfo dslci = {.sType =
                                               VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = 1,
                                           .pBindings = &binding};
  VkDescriptorSetLayout set_layout;
  ASSERT_VK(pcache_create_shader_module(pdev, &smci, NULL, &module));
  ASSERT_VK(pcache_create_descriptor_set_layout(pdev, &dslci, NULL, &set_layout));
  VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &set_layout};
  ASSERT_VK(pcache_create_pipeline_layout(pdev, &plci, NULL, &layout));
  VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main"},
      .layout = layout,
      .basePipelineIndex = -1};
  ASSERT_VK(pcache_get_compute_pipeline(pdev, &cpci, &pipeline));
  pcache_stats st;
  ASSERT_OK(pcache_device_get_stats(pdev, &st));
  ASSERT_EQ(st.compiles, 1);
  ASSERT_EQ(st.unhashable, 0);
  pcache_destroy_pipeline_layout(pdev, layout, NULL);
  pcache_destroy_descriptor_set_layout(pdev, set_layout, NULL);
  pcache_destroy_shader_module(pdev, module, NULL);
  pcache_device_destroy(pdev);
  vkDestroyDevice(device, NULL);
  vkDestroyInstance(instance, NULL);
  test_env_cleanup(&env);
  printf("test_client_volk: ok\n");
  return 0;
}
