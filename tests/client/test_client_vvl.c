/* Under VK_LAYER_KHRONOS_validation (issue 15): a Vulkan 1.0 instance,
 * whose app says so (instance_api_version), gets no call the version does
 * not allow (UNASSIGNED-API-Version-Violation: vkGetPhysicalDeviceProperties2
 * on a 1.0 instance), and a batch whose derivative names a base by index
 * passes validation even when the same state without
 * VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT was requested first
 * (VUID-vkCreateGraphicsPipelines-flags-00721 when pcache returned that
 * one as the base). Each check first shows that the validation layer
 * reports the mistake it looks for, so it cannot pass by seeing nothing.
 * Skipped (77) without the validation layer. */
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "test.h"
#include "vk.h"

static int errors, version_violations, derivative_errors;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                 VkDebugUtilsMessageTypeFlagsEXT types,
                                                 const VkDebugUtilsMessengerCallbackDataEXT *data,
                                                 void *user) {
  (void)types, (void)user;
  const char *id = data->pMessageIdName ? data->pMessageIdName : "";
  if (strstr(id, "API-Version-Violation"))
    version_violations++;
  if (strstr(id, "00721") || strstr(data->pMessage, "ALLOW_DERIVATIVES"))
    derivative_errors++;
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    errors++;
    fprintf(stderr, "validation: %s\n", data->pMessage);
  }
  return VK_FALSE;
}

static int has_validation(void) {
  VkLayerProperties layers[64];
  uint32_t n = 64;
  vkEnumerateInstanceLayerProperties(&n, layers);
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(layers[i].layerName, "VK_LAYER_KHRONOS_validation") == 0)
      return 1;
  return 0;
}

static pcache_device *open_device(const test_vk *vk, uint32_t api) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  info.struct_size = sizeof info;
  info.instance_api_version = api;
  ASSERT_OK(pcache_device_create(NULL, &info, &device));
  return device;
}

int main(void) {
  test_env env;
  test_vk vk = {0};
  const char *layer = "VK_LAYER_KHRONOS_validation";
  const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "pcache-vvl",
                           .apiVersion = VK_API_VERSION_1_0};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app,
                              .enabledLayerCount = 1,
                              .ppEnabledLayerNames = &layer,
                              .enabledExtensionCount = 1,
                              .ppEnabledExtensionNames = &ext};
  VkDebugUtilsMessengerCreateInfoEXT mci = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT,
      .pfnUserCallback = on_message};
  VkDebugUtilsMessengerEXT messenger;
  VkPhysicalDevice pds[8];
  uint32_t n = 8;
  float priority = 1.0f;

  test_env_init(&env, "client-vvl");
  if (!has_validation()) {
    printf("no VK_LAYER_KHRONOS_validation: skipped\n");
    test_env_cleanup(&env);
    return 77;
  }
  ASSERT_VK(vkCreateInstance(&ici, NULL, &vk.instance));
  PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
      (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(vk.instance,
                                                                "vkCreateDebugUtilsMessengerEXT");
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
      (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(vk.instance,
                                                                 "vkDestroyDebugUtilsMessengerEXT");
  ASSERT_TRUE(create_messenger && destroy_messenger);
  ASSERT_VK(create_messenger(vk.instance, &mci, NULL, &messenger));
  ASSERT_VK(vkEnumeratePhysicalDevices(vk.instance, &n, pds));
  vk.physical_device = pds[0];
  for (uint32_t i = 0; i < n; i++) {
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(pds[i], &p);
    if (p.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
      vk.physical_device = pds[i];
  }
  vkGetPhysicalDeviceProperties(vk.physical_device, &vk.props);
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueCount = 1,
                                 .pQueuePriorities = &priority};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  ASSERT_VK(vkCreateDevice(vk.physical_device, &dci, NULL, &vk.device));
  vk.api_version = VK_API_VERSION_1_0;

  /* The layer sees the violation when the app claims more than it asked
   * for (only when the driver could serve 1.2: else pcache never asks). */
  if (vk.props.apiVersion >= VK_API_VERSION_1_2) {
    pcache_device_destroy(open_device(&vk, VK_API_VERSION_1_3));
    ASSERT_GT(version_violations, 0);
    version_violations = errors = 0;
  }
  /* The truth: nothing. Unknown (0) is taken as 1.0 too. */
  pcache_device *device = open_device(&vk, VK_API_VERSION_1_0);
  pcache_device_destroy(open_device(&vk, 0));
  ASSERT_EQ(version_violations, 0);

  test_objects o;
  test_graphics g[2];
  VkGraphicsPipelineCreateInfo infos[2];
  VkPipeline plain, p[2], bad;
  test_objects_create(&o, device);
  for (uint32_t i = 0; i < 2; i++) {
    test_graphics_info(&g[i], &o, i);
    infos[i] = g[i].info;
  }
  /* The layer sees a base made without ALLOW_DERIVATIVES. */
  VkGraphicsPipelineCreateInfo misuse = infos[1];
  ASSERT_VK(vkCreateGraphicsPipelines(vk.device, VK_NULL_HANDLE, 1, &infos[0], NULL, &plain));
  misuse.flags = VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  misuse.basePipelineHandle = plain;
  (void)vkCreateGraphicsPipelines(vk.device, VK_NULL_HANDLE, 1, &misuse, NULL, &bad);
  ASSERT_GT(derivative_errors, 0);
  printf("(the reports above were provoked on purpose: the layer sees what is checked)\n");
  vkDestroyPipeline(vk.device, bad, NULL);
  vkDestroyPipeline(vk.device, plain, NULL);
  derivative_errors = errors = 0;

  /* Through pcache: the plain state first, then the batch. */
  ASSERT_VK(pcache_get_graphics_pipeline(device, &infos[0], &plain));
  infos[0].flags = VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT;
  infos[1].flags = VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  infos[1].basePipelineIndex = 0;
  ASSERT_VK(pcache_create_graphics_pipelines(device, 2, infos, p));
  ASSERT_TRUE(p[0] != plain);
  ASSERT_EQ(derivative_errors, 0);
  ASSERT_EQ(errors, 0);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
  ASSERT_EQ(errors, 0);
  ASSERT_EQ(version_violations, 0);

  vkDestroyDevice(vk.device, NULL);
  destroy_messenger(vk.instance, messenger, NULL);
  vkDestroyInstance(vk.instance, NULL);
  test_env_cleanup(&env);
  printf("test_client_vvl: ok\n");
  return 0;
}
