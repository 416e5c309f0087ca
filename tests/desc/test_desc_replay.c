/* Replay on lavapipe: each fixture is described, decoded back into create
 * infos with its modules rebuilt from stored SPIR-V, and really built on a
 * device (a linked pipeline with its libraries, rebuilt from the
 * descriptions it embeds); then everything is destroyed again. The library
 * fixtures get a device of their own, with VK_EXT_graphics_pipeline_library
 * enabled, when the driver has it.
 *
 * The pipelines go to a keep (replay/keep.h) as pcache-replay's do, and
 * outlive their modules, layouts and render pass there: the validation
 * layer, when installed, says whether Vulkan allows that. The keep's
 * bounds (on its pipelines, and on their blobs' bytes) are checked. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fixtures.h"
#include "replay/keep.h"
#include "test.h"

#define SKIP 77

/* With the Khronos validation layer installed (Debian:
 * vulkan-validationlayers) every decoded create info is also checked
 * against the spec: any error fails the test. */
static int validation_errors;

static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT type,
    const VkDebugUtilsMessengerCallbackDataEXT *data, void *user) {
  (void)type;
  (void)user;
  if (severity & (VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                  VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT)) {
    fprintf(stderr, "validation: %s\n", data->pMessage);
    validation_errors++;
    if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT)
      TEST_FAIL_("invalid Vulkan usage (above)");
  }
  return VK_FALSE;
}

static int have_validation(void) {
  VkLayerProperties layers[64];
  uint32_t n = 64;
  if (vkEnumerateInstanceLayerProperties(&n, layers) < 0)
    return 0;
  for (uint32_t i = 0; i < n; i++)
    if (strcmp(layers[i].layerName, "VK_LAYER_KHRONOS_validation") == 0)
      return 1;
  return 0;
}

/* Each built pipeline is said to have had a blob this big (blob_bytes
 * changes it). */
#define BLOB_BYTES 100
static size_t blob_bytes = BLOB_BYTES;

/* The pipelines replay() built last, newest first. */
static VkPipeline last_built[2];

/* Describes, decodes and builds fixtures [first, end) on device, each
 * pipeline handed to keep; returns how many it built. */
static int replay(VkDevice device, const fx_world *w, int first, int end,
                  pcache__replay_keep *keep) {
  int built = 0;
  for (int i = first; i < end; i++) {
    fx_pipeline *p;
    pcache__desc_buf buf;
    pcache__desc_keys keys;
    pcache__desc_decoded *d;
    VkPipeline pipeline = VK_NULL_HANDLE;
    if (!fx_replayable(i))
      continue;
    p = fx_make(w, i, 0);
    pcache__desc_buf_init(&buf);
    ASSERT_OK(fx_describe(p, w, &buf, &keys));

    /* Without code the objects cannot be made (a library of parts without
     * shaders has none to lack). */
    ASSERT_OK(pcache__desc_decode(buf.data, buf.size, NULL, NULL, &d));
    if (fx_module_count(w, i) > 0) {
      ASSERT_ERR(pcache__desc_decoded_create_objects(d, device, NULL), PCACHE_EMISSING_MODULE);
    } else {
      ASSERT_OK(pcache__desc_decoded_create_objects(d, device, NULL));
      pcache__desc_decoded_destroy_objects(d, device, NULL);
    }
    pcache__desc_decoded_free(d);

    ASSERT_OK(pcache__desc_decode(buf.data, buf.size, fx_code, NULL, &d));
    ASSERT_OK(pcache__desc_decoded_create_objects(d, device, NULL));
    ASSERT_OK(pcache__desc_decoded_create_pipeline(d, device, VK_NULL_HANDLE, NULL, &pipeline));
    ASSERT_TRUE(pipeline != VK_NULL_HANDLE);
    last_built[1] = last_built[0];
    last_built[0] = pipeline;
    pcache__replay_keep_add(keep, device, pipeline, blob_bytes);
    pcache__desc_decoded_destroy_objects(d, device, NULL);
    ASSERT_TRUE(d->layout == VK_NULL_HANDLE && d->render_pass == VK_NULL_HANDLE);
    for (uint32_t l = 0; l < d->n_libraries; l++)
      ASSERT_TRUE(d->library_pipelines[l] == VK_NULL_HANDLE);
    pcache__desc_decoded_free(d);
    pcache__desc_buf_release(&buf);
    fx_free(p);
    printf("%-22s built\n", fx_names[i]);
    built++;
  }
  return built;
}

static int gpl_supported(VkPhysicalDevice phys) {
  VkExtensionProperties exts[512];
  uint32_t n = 512, found = 0;
  VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT fgpl = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                 .pNext = &fgpl};
  if (vkEnumerateDeviceExtensionProperties(phys, NULL, &n, exts) < 0)
    return 0;
  for (uint32_t i = 0; i < n; i++)
    found += !strcmp(exts[i].extensionName, VK_KHR_PIPELINE_LIBRARY_EXTENSION_NAME) ||
             !strcmp(exts[i].extensionName, VK_EXT_GRAPHICS_PIPELINE_LIBRARY_EXTENSION_NAME);
  if (found != 2)
    return 0;
  vkGetPhysicalDeviceFeatures2(phys, &f);
  return fgpl.graphicsPipelineLibrary;
}

int main(void) {
  char dir[] = "/tmp/pcache-desc-replay-XXXXXX";
  VkInstance instance;
  VkPhysicalDevice phys[8];
  uint32_t n_phys = 8;
  VkPhysicalDeviceProperties props;
  VkDevice device;
  fx_world w;
  int built, gpl_built;

  /* The loader wants a private runtime dir (test_env_init's rule). */
  ASSERT_TRUE(mkdtemp(dir));
  ASSERT_EQ(chmod(dir, 0700), 0);
  setenv("XDG_RUNTIME_DIR", dir, 1);

  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "test_desc_replay",
                           .apiVersion = VK_API_VERSION_1_3};
  const char *layer = "VK_LAYER_KHRONOS_validation";
  const char *ext = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;
  VkDebugUtilsMessengerCreateInfoEXT mci = {
      .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
      .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT |
                         VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT,
      .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                     VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT,
      .pfnUserCallback = on_message};
  int validate = have_validation();
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pNext = validate ? &mci : NULL,
                              .pApplicationInfo = &app,
                              .enabledLayerCount = validate ? 1 : 0,
                              .ppEnabledLayerNames = &layer,
                              .enabledExtensionCount = validate ? 1 : 0,
                              .ppEnabledExtensionNames = &ext};
  printf("validation layer: %s\n", validate ? "on" : "not installed");
  if (vkCreateInstance(&ici, NULL, &instance) != VK_SUCCESS) {
    fprintf(stderr, "no Vulkan instance: skipped\n");
    rmdir(dir);
    return SKIP;
  }
  /* The pNext copy only covers vkCreateInstance itself. */
  VkDebugUtilsMessengerEXT messenger = VK_NULL_HANDLE;
  PFN_vkCreateDebugUtilsMessengerEXT create_messenger =
      (PFN_vkCreateDebugUtilsMessengerEXT)vkGetInstanceProcAddr(instance,
                                                                "vkCreateDebugUtilsMessengerEXT");
  PFN_vkDestroyDebugUtilsMessengerEXT destroy_messenger =
      (PFN_vkDestroyDebugUtilsMessengerEXT)vkGetInstanceProcAddr(
          instance, "vkDestroyDebugUtilsMessengerEXT");
  if (validate) {
    ASSERT_TRUE(create_messenger && destroy_messenger);
    ASSERT_VK(create_messenger(instance, &mci, NULL, &messenger));
  }
  ASSERT_VK(vkEnumeratePhysicalDevices(instance, &n_phys, phys));
  ASSERT_GT(n_phys, 0);
  vkGetPhysicalDeviceProperties(phys[0], &props);
  printf("device: %s (api %u.%u)\n", props.deviceName, VK_API_VERSION_MAJOR(props.apiVersion),
         VK_API_VERSION_MINOR(props.apiVersion));
  if (props.apiVersion < VK_API_VERSION_1_3) {
    fprintf(stderr, "Vulkan 1.3 needed: skipped\n");
    vkDestroyInstance(instance, NULL);
    rmdir(dir);
    return SKIP;
  }

  /* Everything the device offers, enabled (multiview, dynamic rendering,
   * sample shading...). */
  VkPhysicalDeviceVulkan13Features f13 = {.sType =
                                              VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
  VkPhysicalDeviceVulkan12Features f12 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES, .pNext = &f13};
  VkPhysicalDeviceVulkan11Features f11 = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, .pNext = &f12};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                 .pNext = &f11};
  vkGetPhysicalDeviceFeatures2(phys[0], &f);
  float prio = 1.0f;
  VkDeviceQueueCreateInfo qci = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                                 .queueFamilyIndex = 0,
                                 .queueCount = 1,
                                 .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &f,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &qci};
  ASSERT_VK(vkCreateDevice(phys[0], &dci, NULL, &device));

  fx_world_init(&w, 0x9000, 8);
  {
    /* At most 3 pipelines: the count binds. */
    pcache__replay_keep *keep;
    unsigned now, peak;
    ASSERT_OK(pcache__replay_keep_new(device, 3, 1u << 20, &keep));
    built = replay(device, &w, 0, FX_GPL_FIRST, keep);
    pcache__replay_keep_counts(keep, &now, &peak);
    ASSERT_EQ(now, 3);
    ASSERT_EQ(peak, 3);
    /* The oldest went to make room. */
    ASSERT_TRUE(pcache__replay_keep_holds(keep, last_built[0]));
    ASSERT_TRUE(pcache__replay_keep_holds(keep, last_built[1]));
    pcache__replay_keep_free(keep);
    /* At most 250 bytes of blobs: two of them. */
    ASSERT_OK(pcache__replay_keep_new(device, 8, 250, &keep));
    ASSERT_EQ(replay(device, &w, 0, FX_GPL_FIRST, keep), built);
    pcache__replay_keep_counts(keep, &now, &peak);
    ASSERT_EQ(now, 2);
    ASSERT_EQ(peak, 2);
    ASSERT_TRUE(pcache__replay_keep_holds(keep, last_built[0]));
    ASSERT_TRUE(pcache__replay_keep_holds(keep, last_built[1]));
    pcache__replay_keep_free(keep);
    /* One alone over the bytes, or a keep of none: destroyed at once. */
    ASSERT_OK(pcache__replay_keep_new(device, 8, BLOB_BYTES - 1, &keep));
    ASSERT_EQ(replay(device, &w, 0, FX_GPL_FIRST, keep), built);
    pcache__replay_keep_counts(keep, &now, &peak);
    ASSERT_EQ(peak, 0);
    pcache__replay_keep_free(keep);
    ASSERT_OK(pcache__replay_keep_new(device, 0, 1u << 20, &keep));
    ASSERT_EQ(replay(device, &w, 0, FX_GPL_FIRST, keep), built);
    pcache__replay_keep_counts(keep, &now, &peak);
    ASSERT_EQ(peak, 0);
    pcache__replay_keep_free(keep);
    /* No keep at all: destroyed where it was built. */
    ASSERT_EQ(replay(device, &w, 0, FX_GPL_FIRST, NULL), built);
    /* Room for a large one after many small ones: more are pushed out
     * than one round under the lock takes (16), and it is kept. */
    ASSERT_OK(pcache__replay_keep_new(device, 64, 20 * BLOB_BYTES, &keep));
    ASSERT_EQ(replay(device, &w, 0, FX_GPL_FIRST, keep), built);
    ASSERT_EQ(replay(device, &w, 0, FX_GPL_FIRST, keep), built);
    pcache__replay_keep_counts(keep, &now, &peak);
    ASSERT_EQ(now, 2 * (unsigned)built > 20 ? 20u : 2 * (unsigned)built);
    ASSERT_GT(now, 16);
    blob_bytes = 20 * BLOB_BYTES - 50;
    ASSERT_GT(replay(device, &w, 0, 1, keep), 0);
    blob_bytes = BLOB_BYTES;
    pcache__replay_keep_counts(keep, &now, &peak);
    ASSERT_EQ(now, 1);
    ASSERT_TRUE(pcache__replay_keep_holds(keep, last_built[0]));
    pcache__replay_keep_free(keep);
  }
  vkDestroyDevice(device, NULL);
  if (gpl_supported(phys[0])) {
    VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT fgpl = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT,
        .graphicsPipelineLibrary = VK_TRUE};
    const char *exts[] = {VK_KHR_PIPELINE_LIBRARY_EXTENSION_NAME,
                          VK_EXT_GRAPHICS_PIPELINE_LIBRARY_EXTENSION_NAME};
    f13.pNext = &fgpl;
    dci.enabledExtensionCount = 2;
    dci.ppEnabledExtensionNames = exts;
    ASSERT_VK(vkCreateDevice(phys[0], &dci, NULL, &device));
    pcache__replay_keep *keep;
    ASSERT_OK(pcache__replay_keep_new(device, 4, 1u << 20, &keep));
    gpl_built = replay(device, &w, FX_GPL_FIRST, FX_COUNT, keep);
    ASSERT_EQ(gpl_built, FX_COUNT - FX_GPL_FIRST);
    pcache__replay_keep_free(keep);
    vkDestroyDevice(device, NULL);
  } else {
    printf("no VK_EXT_graphics_pipeline_library: library fixtures not built\n");
  }
  ASSERT_GE(built, 8);
  ASSERT_EQ(validation_errors, 0);
  fx_world_free(&w);
  if (messenger)
    destroy_messenger(instance, messenger, NULL);
  vkDestroyInstance(instance, NULL);
  rmdir(dir);
  return 0;
}
