/* An app in the style of volk: it does not link libvulkan, loads it with
 * dlopen, and keeps the entry points in globals named exactly like Vulkan's
 * functions. A plugin of the app (volk_globals.so, loaded RTLD_GLOBAL after
 * libvulkan) exports such globals too, as a volk-based library does: a
 * layer loaded after it that referenced any vk* symbol would bind to those
 * data objects and crash, and one that exported vk* functions could be
 * found in their place. This one must work, build a compute pipeline (a
 * compile, then a daemon hit on the second run) and report it. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* As volk does: declarations of the function types only. */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#include "layer_util.h"
#include "test.h"
#include "volk_shaders.h"

/* The globals, as volk declares them. */
PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
PFN_vkCreateInstance vkCreateInstance;
PFN_vkDestroyInstance vkDestroyInstance;
PFN_vkEnumeratePhysicalDevices vkEnumeratePhysicalDevices;
PFN_vkGetPhysicalDeviceProperties vkGetPhysicalDeviceProperties;
PFN_vkGetPhysicalDeviceQueueFamilyProperties vkGetPhysicalDeviceQueueFamilyProperties;
PFN_vkCreateDevice vkCreateDevice;
PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
PFN_vkDestroyDevice vkDestroyDevice;
PFN_vkCreateShaderModule vkCreateShaderModule;
PFN_vkDestroyShaderModule vkDestroyShaderModule;
PFN_vkCreateDescriptorSetLayout vkCreateDescriptorSetLayout;
PFN_vkDestroyDescriptorSetLayout vkDestroyDescriptorSetLayout;
PFN_vkCreatePipelineLayout vkCreatePipelineLayout;
PFN_vkDestroyPipelineLayout vkDestroyPipelineLayout;
PFN_vkCreateComputePipelines vkCreateComputePipelines;
PFN_vkCreatePipelineCache vkCreatePipelineCache;
PFN_vkDestroyPipelineCache vkDestroyPipelineCache;
PFN_vkGetPipelineCacheData vkGetPipelineCacheData;
PFN_vkMergePipelineCaches vkMergePipelineCaches;
PFN_vkDestroyPipeline vkDestroyPipeline;

#define LOAD_I(inst, name)                                                                         \
  ASSERT_TRUE((name = (PFN_##name)vkGetInstanceProcAddr(inst, #name)) != NULL)
#define LOAD_D(dev, name) ASSERT_TRUE((name = (PFN_##name)vkGetDeviceProcAddr(dev, #name)) != NULL)

static void run(void) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "volk-style",
                           .apiVersion = VK_API_VERSION_1_1};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkInstance instance;
  VkPhysicalDevice pds[8];
  uint32_t n = 8, family = 0;
  float priority = 1.0f;
  VkDevice device;
  VkShaderModule module;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout layout;
  VkPipeline pipeline;
  VkDescriptorSetLayoutBinding binding = {.binding = 1,
                                          .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                          .descriptorCount = 1,
                                          .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};

  LOAD_I(NULL, vkCreateInstance);
  ASSERT_VK(vkCreateInstance(&ici, NULL, &instance));
  LOAD_I(instance, vkDestroyInstance);
  LOAD_I(instance, vkEnumeratePhysicalDevices);
  LOAD_I(instance, vkGetPhysicalDeviceProperties);
  LOAD_I(instance, vkGetPhysicalDeviceQueueFamilyProperties);
  LOAD_I(instance, vkCreateDevice);
  LOAD_I(instance, vkGetDeviceProcAddr);
  ASSERT_VK(vkEnumeratePhysicalDevices(instance, &n, pds));
  ASSERT_GT(n, 0);
  {
    VkQueueFamilyProperties families[16];
    uint32_t nf = 16;
    vkGetPhysicalDeviceQueueFamilyProperties(pds[0], &nf, families);
    while (family < nf && !(families[family].queueFlags & VK_QUEUE_COMPUTE_BIT))
      family++;
    ASSERT_LT(family, nf);
  }
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = family,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  ASSERT_VK(vkCreateDevice(pds[0], &dci, NULL, &device));
  LOAD_D(device, vkDestroyDevice);
  LOAD_D(device, vkCreateShaderModule);
  LOAD_D(device, vkDestroyShaderModule);
  LOAD_D(device, vkCreateDescriptorSetLayout);
  LOAD_D(device, vkDestroyDescriptorSetLayout);
  LOAD_D(device, vkCreatePipelineLayout);
  LOAD_D(device, vkDestroyPipelineLayout);
  LOAD_D(device, vkCreateComputePipelines);
  LOAD_D(device, vkDestroyPipeline);

  VkShaderModuleCreateInfo smci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                   .codeSize = sizeof volk_shaders_fill_comp,
                                   .pCode = volk_shaders_fill_comp};
  ASSERT_VK(vkCreateShaderModule(device, &smci, NULL, &module));
  VkDescriptorSetLayoutCreateInfo dslci = {.sType =
                                               VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                           .bindingCount = 1,
                                           .pBindings = &binding};
  ASSERT_VK(vkCreateDescriptorSetLayout(device, &dslci, NULL, &set_layout));
  VkPipelineLayoutCreateInfo plci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1,
                                     .pSetLayouts = &set_layout};
  ASSERT_VK(vkCreatePipelineLayout(device, &plci, NULL, &layout));
  VkComputePipelineCreateInfo cpci = {
      .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
      .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                .stage = VK_SHADER_STAGE_COMPUTE_BIT,
                .module = module,
                .pName = "main"},
      .layout = layout,
      .basePipelineIndex = -1};
  ASSERT_VK(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &cpci, NULL, &pipeline));
  vkDestroyPipeline(device, pipeline, NULL);
  vkDestroyPipelineLayout(device, layout, NULL);
  vkDestroyDescriptorSetLayout(device, set_layout, NULL);
  vkDestroyShaderModule(device, module, NULL);
  vkDestroyDevice(device, NULL);
  vkDestroyInstance(instance, NULL);
}

int main(void) {
  test_env env;
  void *lib;
  layer_report r;
  layer_test_start(&env, "layer-volk");
  lib = dlopen("libvulkan.so.1", RTLD_NOW | RTLD_LOCAL);
  ASSERT_TRUE(lib != NULL);
  vkGetInstanceProcAddr = (PFN_vkGetInstanceProcAddr)dlsym(lib, "vkGetInstanceProcAddr");
  ASSERT_TRUE(vkGetInstanceProcAddr != NULL);
  /* After libvulkan (RTLD_NOW bound it already), before the layer loads. */
  ASSERT_TRUE(dlopen(PCACHE_VOLK_GLOBALS, RTLD_NOW | RTLD_GLOBAL) != NULL);

  run();
  layer_report_read(&r);
  ASSERT_EQ(r.lines, 1);
  ASSERT_EQ(r.compiles, 1);
  run();
  layer_report_read(&r);
  ASSERT_EQ(r.daemon_hits, 1);
  ASSERT_EQ(r.compiles, 0);
  test_env_cleanup(&env);
  printf("test_layer_volk: ok\n");
  return 0;
}
