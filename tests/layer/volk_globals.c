/* A plugin built with volk: data objects named like Vulkan's functions, with
 * default visibility. test_layer_volk.c loads it RTLD_GLOBAL. */
#define VK_NO_PROTOTYPES
#include <vulkan/vulkan.h>

#define VOLK_GLOBAL __attribute__((visibility("default")))
VOLK_GLOBAL PFN_vkGetInstanceProcAddr vkGetInstanceProcAddr;
VOLK_GLOBAL PFN_vkGetDeviceProcAddr vkGetDeviceProcAddr;
VOLK_GLOBAL PFN_vkCreateInstance vkCreateInstance;
VOLK_GLOBAL PFN_vkCreateDevice vkCreateDevice;
VOLK_GLOBAL PFN_vkGetPhysicalDeviceProperties vkGetPhysicalDeviceProperties;
VOLK_GLOBAL PFN_vkGetPhysicalDeviceProperties2 vkGetPhysicalDeviceProperties2;
VOLK_GLOBAL PFN_vkCreatePipelineCache vkCreatePipelineCache;
VOLK_GLOBAL PFN_vkCreateComputePipelines vkCreateComputePipelines;
VOLK_GLOBAL PFN_vkCreateGraphicsPipelines vkCreateGraphicsPipelines;
VOLK_GLOBAL PFN_vkMergePipelineCaches vkMergePipelineCaches;
VOLK_GLOBAL PFN_vkGetPipelineCacheData vkGetPipelineCacheData;
