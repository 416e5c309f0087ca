/*
 * pcache-demo - build N graphics pipelines through libpcache and say where
 * each one came from.
 *
 * A headless Vulkan program (no window, no swapchain) on whatever device the
 * loader gives first. Run it twice against one pcached: the first run
 * compiles and uploads, the second finds the blobs in the daemon. It prints
 * key=value lines (for scripts) and then a short human summary. With
 * --plain it builds the same pipelines with no pcache code at all, as a
 * program the Vulkan layer serves (docs/layer.md).
 *
 * One file on purpose, though over the ~600 lines the project aims for: an
 * example is read top to bottom, and everything it needs (Vulkan set-up,
 * objects, the variants, both paths) is here rather than in helpers the
 * reader would have to find.
 *
 *   pcache-demo [--pipelines N] [--app-name NAME] [--device INDEX] [--no-daemon]
 *               [--plain [--cache-file FILE] [--threads N] [--shuffle]
 *               [--fresh-caches | --cache-group N] [--fresh-objects] [--destroy-each]
 *               [--alternate] [--read-each]]
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include <vulkan/vulkan.h>

#include <pcache/pcache.h>

#include "demo_shaders.h"

#define DEMO_NAME "pcache-demo"
#define DEMO_MAX_PIPELINES 4096
/* Tier-1 key: the demo has one global state (one render pass). */
#define DEMO_GLOBAL_KEY UINT64_C(0x70636163686531)

/* Programs log with sd-daemon "<N>" prefixes when stderr is the journal,
 * so journald reads the level, and the level as a word anywhere else
 * (common/log.h, which the demo, using only the public header, does not
 * link). */
#define log_err(...) demo_log(3, __VA_ARGS__)

static void demo_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* $JOURNAL_STREAM names stderr's device and inode (systemd.exec(5)). */
static int stderr_is_journal(void) {
  const char *v = getenv("JOURNAL_STREAM");
  unsigned long long dev, ino;
  struct stat st;
  char end;
  return v && sscanf(v, "%llu:%llu%c", &dev, &ino, &end) == 2 && fstat(STDERR_FILENO, &st) == 0 &&
         (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

static void demo_log(int level, const char *fmt, ...) {
  static const char *const words[] = {"emerg",   "alert",  "crit", "error",
                                      "warning", "notice", "info", "debug"};
  va_list ap;
  if (stderr_is_journal())
    fprintf(stderr, "<%d>" DEMO_NAME ": ", level);
  else
    fprintf(stderr, "%s: " DEMO_NAME ": ", words[level & 7]);
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
}

typedef struct demo_options {
  uint32_t pipelines;
  const char *app_name;
  uint32_t device_index;
  int no_daemon;
  int plain;              /* no pcache code: plain Vulkan (what the layer serves) */
  const char *cache_file; /* --plain: the app's own VkPipelineCache file */
  uint32_t threads;       /* --plain: threads creating pipelines (replay's baseline) */
  int shuffle;            /* --plain: the variants in a fixed scrambled order */
  uint32_t fresh_caches;  /* --plain: each run of this many pipelines (of a thread)
                           * into an empty cache of its own; 0: none */
  int fresh_objects;      /* --plain: each pipeline with a layout and render pass of its own */
  int destroy_each;       /* --plain: each pipeline destroyed once made */
  int alternate;          /* --plain: the probes above on every other pipeline */
  int read_each;          /* --plain: a fresh cache's data read after each pipeline */
} demo_options;

typedef struct demo_vk {
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice device;
  VkPhysicalDeviceProperties props;
  int creation_feedback;
  int cache_control;    /* pipelineCreationCacheControl enabled */
  uint32_t api_version; /* what the instance asked for */
} demo_vk;

/* What the app builds its pipelines from: made through pcache's wrappers so
 * every pipeline can be described by content. */
typedef struct demo_objects {
  VkShaderModule vert, frag;
  VkSampler sampler;
  VkDescriptorSetLayout set_layout;
  VkPipelineLayout pipeline_layout;
  VkRenderPass render_pass;
} demo_objects;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: " DEMO_NAME " [--pipelines N] [--app-name NAME] [--device INDEX] "
          "[--no-daemon] [--plain [--cache-file FILE] [--threads N] [--shuffle]\n"
          "        [--fresh-caches | --cache-group N] [--fresh-objects] [--destroy-each]\n"
          "        [--alternate] [--read-each]]\n"
          "  --pipelines N    graphics pipelines to build (default 64, at most %d)\n"
          "  --app-name NAME  name the daemon files entries under (default " DEMO_NAME ")\n"
          "  --device INDEX   physical device to use (default 0, the loader's first)\n"
          "  --no-daemon      never contact pcached (same as PCACHE_DISABLE=1)\n"
          "  --plain          use no pcache code at all: plain vkCreate* calls, as a\n"
          "                   program that never heard of pcache makes them (run it\n"
          "                   with PCACHE_LAYER=1 to see the layer serve it)\n"
          "  --cache-file F   with --plain: load the app's own pipeline cache from F\n"
          "                   if it exists, save it there at exit\n"
          "  --threads N      with --plain: create the pipelines on N threads (default 1)\n"
          "  --shuffle        with --plain: create them in a fixed scrambled order, as\n"
          "                   a replay that walks them by hash does (a benchmark's probe)\n"
          "  --fresh-caches   with --plain: each pipeline into an empty VkPipelineCache of\n"
          "                   its own, its data read back, as pcache-replay and a\n"
          "                   compile through libpcache do (a benchmark's probe)\n"
          "  --cache-group N  with --plain: as --fresh-caches, but each N pipelines of a\n"
          "                   thread into one cache (a probe)\n"
          "  --read-each      with --fresh-caches or --cache-group: read the cache's data\n"
          "                   after each pipeline, not only once its group is full\n"
          "  --fresh-objects  with --plain: each pipeline with a sampler, layouts and\n"
          "                   render pass made for it and destroyed after, as\n"
          "                   pcache-replay makes them from a description (a probe)\n"
          "  --destroy-each   with --plain: destroy each pipeline as soon as it is made,\n"
          "                   as a replayer that keeps none alive would (a probe)\n"
          "  --alternate      with --plain: the probes above but --shuffle on every other\n"
          "                   pipeline of a thread only, each half's time reported\n"
          "                   apart: what a probe costs, measured within one process\n",
          DEMO_MAX_PIPELINES);
}

static int parse_u32(const char *text, uint32_t min, uint32_t max, uint32_t *ret_value) {
  char *end;
  unsigned long v;
  errno = 0;
  v = strtoul(text, &end, 10);
  if (errno || end == text || *end || v < min || v > max)
    return -EINVAL;
  *ret_value = (uint32_t)v;
  return 0;
}

/* Returns 0, 1 for --help, or -EINVAL after printing usage. */
static int parse_args(int argc, char **argv, demo_options *ret_opts) {
  demo_options opts = {.pipelines = 64, .app_name = DEMO_NAME, .threads = 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(a, "--no-daemon")) {
      opts.no_daemon = 1;
    } else if (!strcmp(a, "--plain")) {
      opts.plain = 1;
    } else if (!strcmp(a, "--shuffle")) {
      opts.shuffle = 1;
    } else if (!strcmp(a, "--fresh-caches") && !opts.fresh_caches) {
      opts.fresh_caches = 1;
    } else if (!strcmp(a, "--cache-group") && val && !opts.fresh_caches) {
      if (parse_u32(val, 1, DEMO_MAX_PIPELINES, &opts.fresh_caches) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--fresh-objects")) {
      opts.fresh_objects = 1;
    } else if (!strcmp(a, "--destroy-each")) {
      opts.destroy_each = 1;
    } else if (!strcmp(a, "--alternate")) {
      opts.alternate = 1;
    } else if (!strcmp(a, "--read-each")) {
      opts.read_each = 1;
    } else if (!strcmp(a, "--cache-file") && val && *val) {
      opts.cache_file = val;
      i++;
    } else if (!strcmp(a, "--pipelines") && val) {
      if (parse_u32(val, 1, DEMO_MAX_PIPELINES, &opts.pipelines) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--threads") && val) {
      if (parse_u32(val, 1, 64, &opts.threads) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--device") && val) {
      if (parse_u32(val, 0, 64, &opts.device_index) < 0)
        goto out_usage;
      i++;
    } else if (!strcmp(a, "--app-name") && val && *val) {
      opts.app_name = val;
      i++;
    } else {
      goto out_usage;
    }
  }
  if ((opts.cache_file || opts.threads > 1 || opts.shuffle || opts.fresh_caches ||
       opts.fresh_objects || opts.destroy_each || opts.alternate || opts.read_each) &&
      !opts.plain)
    goto out_usage;
  if (opts.read_each && !opts.fresh_caches)
    goto out_usage;
  *ret_opts = opts;
  return 0;

out_usage:
  usage(stderr);
  return -EINVAL;
}

static int has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name) {
  for (uint32_t i = 0; i < n; i++)
    if (!strcmp(exts[i].extensionName, name))
      return 1;
  return 0;
}

static int vk_init(const demo_options *opts, demo_vk *ret_vk) {
  demo_vk vk = {0};
  uint32_t api = VK_API_VERSION_1_0, count = 0, queue_family = UINT32_MAX, n_ext = 0;
  VkPhysicalDevice *devices = NULL;
  VkQueueFamilyProperties *families = NULL;
  VkExtensionProperties *exts = NULL;
  const char *enabled[1];
  uint32_t n_enabled = 0;
  VkResult vr;
  int r = -EIO;

  /* Ask for 1.3 where the loader has it: creation feedback is core there. */
  if (vkEnumerateInstanceVersion(&api) != VK_SUCCESS)
    api = VK_API_VERSION_1_0;
  if (api > VK_API_VERSION_1_3)
    api = VK_API_VERSION_1_3;
  vk.api_version = api;

  VkApplicationInfo app = {
      .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
      .pApplicationName = opts->app_name,
      .applicationVersion = 1,
      .pEngineName = DEMO_NAME,
      .apiVersion = api,
  };
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  vr = vkCreateInstance(&ici, NULL, &vk.instance);
  if (vr != VK_SUCCESS) {
    log_err("vkCreateInstance: VkResult %d (is a Vulkan driver installed? Debian: "
            "mesa-vulkan-drivers)",
            (int)vr);
    return -EIO;
  }

  vr = vkEnumeratePhysicalDevices(vk.instance, &count, NULL);
  if (vr != VK_SUCCESS || count == 0) {
    log_err("no Vulkan physical device");
    goto out_instance;
  }
  devices = calloc(count, sizeof *devices);
  if (!devices) {
    r = -ENOMEM;
    goto out_instance;
  }
  vkEnumeratePhysicalDevices(vk.instance, &count, devices);
  if (opts->device_index >= count) {
    log_err("--device %" PRIu32 ": only %" PRIu32 " device(s)", opts->device_index, count);
    r = -EINVAL;
    goto out_free;
  }
  vk.physical_device = devices[opts->device_index];
  vkGetPhysicalDeviceProperties(vk.physical_device, &vk.props);

  vkGetPhysicalDeviceQueueFamilyProperties(vk.physical_device, &count, NULL);
  families = calloc(count ? count : 1, sizeof *families);
  if (!families) {
    r = -ENOMEM;
    goto out_free;
  }
  vkGetPhysicalDeviceQueueFamilyProperties(vk.physical_device, &count, families);
  for (uint32_t i = 0; i < count && queue_family == UINT32_MAX; i++)
    if (families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)
      queue_family = i;
  if (queue_family == UINT32_MAX) {
    log_err("%s has no graphics queue", vk.props.deviceName);
    goto out_free;
  }

  vkEnumerateDeviceExtensionProperties(vk.physical_device, NULL, &n_ext, NULL);
  exts = calloc(n_ext ? n_ext : 1, sizeof *exts);
  if (!exts) {
    r = -ENOMEM;
    goto out_free;
  }
  vkEnumerateDeviceExtensionProperties(vk.physical_device, NULL, &n_ext, exts);
  /* Creation feedback is how the demo learns that the driver's cache hit. */
  if (has_extension(exts, n_ext, VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME)) {
    enabled[n_enabled++] = VK_EXT_PIPELINE_CREATION_FEEDBACK_EXTENSION_NAME;
    vk.creation_feedback = 1;
  }
  if (api >= VK_API_VERSION_1_3 && vk.props.apiVersion >= VK_API_VERSION_1_3)
    vk.creation_feedback = 1;
  /* libpcache asks the driver's own caches first when the device allows
   * FAIL_ON_PIPELINE_COMPILE_REQUIRED (pcache_device_info.cache_control).
   * The plain program asks for nothing beyond the defaults: through the
   * layer, the layer enables it itself. */
  VkPhysicalDevicePipelineCreationCacheControlFeatures cache_control = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_CREATION_CACHE_CONTROL_FEATURES};
  if (!opts->plain && api >= VK_API_VERSION_1_3 && vk.props.apiVersion >= VK_API_VERSION_1_3) {
    VkPhysicalDeviceFeatures2 f2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                    .pNext = &cache_control};
    vkGetPhysicalDeviceFeatures2(vk.physical_device, &f2);
    cache_control.pNext = NULL;
    vk.cache_control = cache_control.pipelineCreationCacheControl == VK_TRUE;
  }

  float priority = 1.0f;
  VkDeviceQueueCreateInfo qci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
      .queueFamilyIndex = queue_family,
      .queueCount = 1,
      .pQueuePriorities = &priority,
  };
  VkDeviceCreateInfo dci = {
      .sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
      .pNext = vk.cache_control ? &cache_control : NULL,
      .queueCreateInfoCount = 1,
      .pQueueCreateInfos = &qci,
      .enabledExtensionCount = n_enabled,
      .ppEnabledExtensionNames = n_enabled ? enabled : NULL,
  };
  vr = vkCreateDevice(vk.physical_device, &dci, NULL, &vk.device);
  if (vr != VK_SUCCESS) {
    log_err("vkCreateDevice: VkResult %d", (int)vr);
    goto out_free;
  }

  free(exts);
  free(families);
  free(devices);
  *ret_vk = vk;
  return 0;

out_free:
  free(exts);
  free(families);
  free(devices);
out_instance:
  vkDestroyInstance(vk.instance, NULL);
  return r;
}

static void vk_fini(demo_vk *vk) {
  if (vk->device)
    vkDestroyDevice(vk->device, NULL);
  if (vk->instance)
    vkDestroyInstance(vk->instance, NULL);
}

static VkFormat pick_depth_format(VkPhysicalDevice pd) {
  static const VkFormat candidates[] = {VK_FORMAT_D32_SFLOAT, VK_FORMAT_X8_D24_UNORM_PACK32,
                                        VK_FORMAT_D16_UNORM};
  for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
    VkFormatProperties fp;
    vkGetPhysicalDeviceFormatProperties(pd, candidates[i], &fp);
    if (fp.optimalTilingFeatures & VK_FORMAT_FEATURE_DEPTH_STENCIL_ATTACHMENT_BIT)
      return candidates[i];
  }
  return VK_FORMAT_D16_UNORM; /* required by the spec */
}

/* Through pcache's wrappers, or (pdev NULL, --plain) straight to Vulkan. */
#define OBJ_CREATE(wrapper, plain, info, ret)                                                      \
  (pdev ? wrapper(pdev, (info), NULL, (ret)) : plain(vk->device, (info), NULL, (ret)))
#define OBJ_DESTROY(wrapper, plain, handle)                                                        \
  (pdev ? wrapper(pdev, (handle), NULL) : plain(vk->device, (handle), NULL))

static void objects_destroy(pcache_device *pdev, const demo_vk *vk, demo_objects *o) {
  /* Each destroy accepts VK_NULL_HANDLE, as vkDestroy* does. */
  OBJ_DESTROY(pcache_destroy_render_pass, vkDestroyRenderPass, o->render_pass);
  OBJ_DESTROY(pcache_destroy_pipeline_layout, vkDestroyPipelineLayout, o->pipeline_layout);
  OBJ_DESTROY(pcache_destroy_descriptor_set_layout, vkDestroyDescriptorSetLayout, o->set_layout);
  OBJ_DESTROY(pcache_destroy_sampler, vkDestroySampler, o->sampler);
  OBJ_DESTROY(pcache_destroy_shader_module, vkDestroyShaderModule, o->frag);
  OBJ_DESTROY(pcache_destroy_shader_module, vkDestroyShaderModule, o->vert);
}

static VkResult objects_create(pcache_device *pdev, const demo_vk *vk, demo_objects *ret_objs) {
  demo_objects o = {0};
  VkResult vr;

  VkShaderModuleCreateInfo vsi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = sizeof demo_shaders_mesh_vert,
                                  .pCode = demo_shaders_mesh_vert};
  VkShaderModuleCreateInfo fsi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                  .codeSize = sizeof demo_shaders_pbr_frag,
                                  .pCode = demo_shaders_pbr_frag};
  vr = OBJ_CREATE(pcache_create_shader_module, vkCreateShaderModule, &vsi, &o.vert);
  if (vr != VK_SUCCESS)
    goto out;
  vr = OBJ_CREATE(pcache_create_shader_module, vkCreateShaderModule, &fsi, &o.frag);
  if (vr != VK_SUCCESS)
    goto out;

  VkSamplerCreateInfo sci = {
      .sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
      .magFilter = VK_FILTER_LINEAR,
      .minFilter = VK_FILTER_LINEAR,
      .mipmapMode = VK_SAMPLER_MIPMAP_MODE_LINEAR,
      .addressModeU = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .addressModeV = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .addressModeW = VK_SAMPLER_ADDRESS_MODE_REPEAT,
      .maxLod = VK_LOD_CLAMP_NONE,
  };
  vr = OBJ_CREATE(pcache_create_sampler, vkCreateSampler, &sci, &o.sampler);
  if (vr != VK_SUCCESS)
    goto out;

  /* An immutable sampler is part of the layout, so of the pipeline state. */
  VkDescriptorSetLayoutBinding bindings[] = {
      {.binding = 0,
       .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
       .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT},
      {.binding = 1,
       .descriptorType = VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER,
       .descriptorCount = 1,
       .stageFlags = VK_SHADER_STAGE_FRAGMENT_BIT,
       .pImmutableSamplers = &o.sampler},
  };
  VkDescriptorSetLayoutCreateInfo dsl = {
      .sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
      .bindingCount = 2,
      .pBindings = bindings,
  };
  vr = OBJ_CREATE(pcache_create_descriptor_set_layout, vkCreateDescriptorSetLayout, &dsl,
                  &o.set_layout);
  if (vr != VK_SUCCESS)
    goto out;

  VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_VERTEX_BIT, .size = 64};
  VkPipelineLayoutCreateInfo pli = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
      .setLayoutCount = 1,
      .pSetLayouts = &o.set_layout,
      .pushConstantRangeCount = 1,
      .pPushConstantRanges = &push,
  };
  vr = OBJ_CREATE(pcache_create_pipeline_layout, vkCreatePipelineLayout, &pli, &o.pipeline_layout);
  if (vr != VK_SUCCESS)
    goto out;

  VkAttachmentDescription atts[] = {
      {.format = VK_FORMAT_R8G8B8A8_UNORM,
       .samples = VK_SAMPLE_COUNT_1_BIT,
       .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
       .storeOp = VK_ATTACHMENT_STORE_OP_STORE,
       .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
       .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
       .finalLayout = VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL},
      {.format = pick_depth_format(vk->physical_device),
       .samples = VK_SAMPLE_COUNT_1_BIT,
       .loadOp = VK_ATTACHMENT_LOAD_OP_CLEAR,
       .storeOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
       .stencilLoadOp = VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       .stencilStoreOp = VK_ATTACHMENT_STORE_OP_DONT_CARE,
       .initialLayout = VK_IMAGE_LAYOUT_UNDEFINED,
       .finalLayout = VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL},
  };
  VkAttachmentReference color_ref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference depth_ref = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkSubpassDescription subpass = {
      .pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
      .colorAttachmentCount = 1,
      .pColorAttachments = &color_ref,
      .pDepthStencilAttachment = &depth_ref,
  };
  VkRenderPassCreateInfo rpi = {
      .sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
      .attachmentCount = 2,
      .pAttachments = atts,
      .subpassCount = 1,
      .pSubpasses = &subpass,
  };
  vr = OBJ_CREATE(pcache_create_render_pass, vkCreateRenderPass, &rpi, &o.render_pass);
  if (vr != VK_SUCCESS)
    goto out;

  *ret_objs = o;
  return VK_SUCCESS;

out:
  objects_destroy(pdev, vk, &o);
  return vr;
}

/* Everything one VkGraphicsPipelineCreateInfo points at, so a variant can be
 * filled in place and handed to pcache without dangling pointers. */
typedef struct demo_variant {
  VkPipelineShaderStageCreateInfo stages[2];
  VkSpecializationMapEntry spec_entries[2];
  uint32_t spec_data[2];
  VkSpecializationInfo spec;
  VkVertexInputBindingDescription vertex_binding;
  VkVertexInputAttributeDescription vertex_attrs[3];
  VkPipelineVertexInputStateCreateInfo vertex_input;
  VkPipelineInputAssemblyStateCreateInfo input_assembly;
  VkPipelineViewportStateCreateInfo viewport;
  VkPipelineRasterizationStateCreateInfo raster;
  VkPipelineMultisampleStateCreateInfo multisample;
  VkPipelineDepthStencilStateCreateInfo depth;
  VkPipelineColorBlendAttachmentState blend_att;
  VkPipelineColorBlendStateCreateInfo blend;
  VkDynamicState dynamic_states[2];
  VkPipelineDynamicStateCreateInfo dynamic;
  VkGraphicsPipelineCreateInfo info;
} demo_variant;

/*
 * Variant i: bit 0 blending, bit 1 topology, bit 2 cull mode, bit 3 alpha
 * test, and the rest the light count (a specialization constant), so every
 * i up to DEMO_MAX_PIPELINES is a distinct pipeline.
 */
static void variant_fill(demo_variant *v, const demo_objects *o, uint32_t i) {
  int blend_on = i & 1, strip = (i >> 1) & 1, cull_back = (i >> 2) & 1, alpha_test = (i >> 3) & 1;
  uint32_t lights = 1 + (i >> 4);

  memset(v, 0, sizeof *v);
  v->spec_data[0] = lights;
  v->spec_data[1] = (uint32_t)alpha_test;
  v->spec_entries[0] = (VkSpecializationMapEntry){0, 0, sizeof(uint32_t)};
  v->spec_entries[1] = (VkSpecializationMapEntry){1, sizeof(uint32_t), sizeof(uint32_t)};
  v->spec = (VkSpecializationInfo){2, v->spec_entries, sizeof v->spec_data, v->spec_data};
  v->stages[0] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_VERTEX_BIT,
      .module = o->vert,
      .pName = "main"};
  v->stages[1] = (VkPipelineShaderStageCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
      .stage = VK_SHADER_STAGE_FRAGMENT_BIT,
      .module = o->frag,
      .pName = "main",
      .pSpecializationInfo = &v->spec};

  v->vertex_binding = (VkVertexInputBindingDescription){0, 32, VK_VERTEX_INPUT_RATE_VERTEX};
  v->vertex_attrs[0] = (VkVertexInputAttributeDescription){0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0};
  v->vertex_attrs[1] = (VkVertexInputAttributeDescription){1, 0, VK_FORMAT_R32G32B32_SFLOAT, 12};
  v->vertex_attrs[2] = (VkVertexInputAttributeDescription){2, 0, VK_FORMAT_R32G32_SFLOAT, 24};
  v->vertex_input = (VkPipelineVertexInputStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
      .vertexBindingDescriptionCount = 1,
      .pVertexBindingDescriptions = &v->vertex_binding,
      .vertexAttributeDescriptionCount = 3,
      .pVertexAttributeDescriptions = v->vertex_attrs};
  v->input_assembly = (VkPipelineInputAssemblyStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology =
          strip ? VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP : VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
  v->viewport = (VkPipelineViewportStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .scissorCount = 1};
  v->raster = (VkPipelineRasterizationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .polygonMode = VK_POLYGON_MODE_FILL,
      .cullMode = cull_back ? VK_CULL_MODE_BACK_BIT : VK_CULL_MODE_NONE,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1.0f};
  v->multisample = (VkPipelineMultisampleStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
  v->depth = (VkPipelineDepthStencilStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
      .depthTestEnable = VK_TRUE,
      .depthWriteEnable = blend_on ? VK_FALSE : VK_TRUE,
      .depthCompareOp = VK_COMPARE_OP_LESS_OR_EQUAL,
      .maxDepthBounds = 1.0f};
  v->blend_att = (VkPipelineColorBlendAttachmentState){
      .blendEnable = blend_on ? VK_TRUE : VK_FALSE,
      .srcColorBlendFactor = VK_BLEND_FACTOR_SRC_ALPHA,
      .dstColorBlendFactor = VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA,
      .colorBlendOp = VK_BLEND_OP_ADD,
      .srcAlphaBlendFactor = VK_BLEND_FACTOR_ONE,
      .dstAlphaBlendFactor = VK_BLEND_FACTOR_ZERO,
      .alphaBlendOp = VK_BLEND_OP_ADD,
      .colorWriteMask = VK_COLOR_COMPONENT_R_BIT | VK_COLOR_COMPONENT_G_BIT |
                        VK_COLOR_COMPONENT_B_BIT | VK_COLOR_COMPONENT_A_BIT};
  v->blend = (VkPipelineColorBlendStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &v->blend_att};
  v->dynamic_states[0] = VK_DYNAMIC_STATE_VIEWPORT;
  v->dynamic_states[1] = VK_DYNAMIC_STATE_SCISSOR;
  v->dynamic = (VkPipelineDynamicStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
      .dynamicStateCount = 2,
      .pDynamicStates = v->dynamic_states};
  v->info = (VkGraphicsPipelineCreateInfo){.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                           .stageCount = 2,
                                           .pStages = v->stages,
                                           .pVertexInputState = &v->vertex_input,
                                           .pInputAssemblyState = &v->input_assembly,
                                           .pViewportState = &v->viewport,
                                           .pRasterizationState = &v->raster,
                                           .pMultisampleState = &v->multisample,
                                           .pDepthStencilState = &v->depth,
                                           .pColorBlendState = &v->blend,
                                           .pDynamicState = &v->dynamic,
                                           .layout = o->pipeline_layout,
                                           .renderPass = o->render_pass,
                                           .subpass = 0,
                                           .basePipelineIndex = -1};
}

static int is_software_driver(const VkPhysicalDeviceProperties *props) {
  return props->deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ||
         strstr(props->deviceName, "llvmpipe") || strstr(props->deviceName, "lavapipe");
}

/* --plain: the app's own cache file, read if it exists. */
static VkPipelineCache plain_cache_load(const demo_vk *vk, const char *path, size_t *ret_bytes) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache cache = VK_NULL_HANDLE;
  void *data = NULL;
  long size = 0;
  FILE *f = fopen(path, "rb");
  *ret_bytes = 0;
  if (f && fseek(f, 0, SEEK_END) == 0 && (size = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
      (data = malloc((size_t)size)) != NULL && fread(data, 1, (size_t)size, f) == (size_t)size) {
    ci.initialDataSize = (size_t)size;
    ci.pInitialData = data;
    *ret_bytes = (size_t)size;
  }
  if (f)
    fclose(f);
  /* The driver checks the header and ignores data it cannot use. */
  if (vkCreatePipelineCache(vk->device, &ci, NULL, &cache) != VK_SUCCESS)
    cache = VK_NULL_HANDLE;
  free(data);
  return cache;
}

static void plain_cache_save(const demo_vk *vk, VkPipelineCache cache, const char *path) {
  size_t size = 0;
  void *data;
  FILE *f;
  if (vkGetPipelineCacheData(vk->device, cache, &size, NULL) != VK_SUCCESS || !size ||
      !(data = malloc(size)))
    return;
  if (vkGetPipelineCacheData(vk->device, cache, &size, data) == VK_SUCCESS &&
      (f = fopen(path, "wb")) != NULL) {
    if (fwrite(data, 1, size, f) != size)
      log_err("writing %s failed", path);
    fclose(f);
  }
  free(data);
}

/* One --plain thread: pipelines first, first + step, ... */
typedef struct plain_slice {
  const demo_vk *vk;
  const demo_objects *objs;
  VkPipelineCache cache;
  VkPipeline *pipelines;
  const uint32_t *order; /* the variant at each position */
  uint32_t fresh_caches; /* pipelines into each fresh cache; 0: none */
  int fresh_objects;
  int destroy_each;
  int alternate;
  int read_each; /* a fresh cache's data read after each pipeline */
  uint32_t first, step, count;
  uint32_t hits;
  size_t fresh_bytes;       /* the fresh caches' data, summed */
  uint32_t fresh_made;      /* fresh caches made */
  uint32_t fresh_pipelines; /* pipelines built into them */
  double half_ms[2];   /* --alternate: time of the unprobed [0] and probed [1] */
  uint32_t half_n[2];
  VkResult result;
  pthread_t thread;
} plain_slice;

/* Reads a fresh cache's data back, as a replayer does. */
static void fresh_cache_read(plain_slice *s, VkPipelineCache cache) {
  size_t size = 0;
  void *data = NULL;
  if (s->result == VK_SUCCESS &&
      vkGetPipelineCacheData(s->vk->device, cache, &size, NULL) == VK_SUCCESS &&
      (data = malloc(size ? size : 1)) != NULL &&
      vkGetPipelineCacheData(s->vk->device, cache, &size, data) == VK_SUCCESS)
    s->fresh_bytes += size;
  free(data);
}

static void *plain_slice_main(void *arg) {
  plain_slice *s = arg;
  demo_variant *variant = malloc(sizeof *variant);
  s->result = variant ? VK_SUCCESS : VK_ERROR_OUT_OF_HOST_MEMORY;
  /* The fresh cache of the probed pipelines, apart from s->cache: with
   * --alternate the others in between must not go into it. */
  VkPipelineCache fresh = VK_NULL_HANDLE;
  uint32_t in_cache = 0; /* pipelines in the fresh cache so far */
  for (uint32_t pos = s->first; variant && pos < s->count; pos += s->step) {
    uint32_t i = s->order[pos];
    /* --alternate: the probes on the odd pipelines of this thread only. */
    int probed = !s->alternate || ((pos - s->first) / s->step) % 2;
    double t0 = now_ms();
    VkPipelineCreationFeedback fb = {0};
    VkPipelineCreationFeedbackCreateInfo fci = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
        .pPipelineCreationFeedback = &fb};
    /* The probes this pipeline gets. */
    int own_objects = s->fresh_objects && probed, into_fresh = s->fresh_caches && probed;
    demo_objects own = {0};
    variant_fill(variant, s->objs, i);
    if (own_objects) {
      /* The shader modules stay shared, as pcache-replay's pool keeps
       * them; the rest is made for this pipeline alone. */
      if ((s->result = objects_create(NULL, s->vk, &own)) != VK_SUCCESS) {
        log_err("the objects of variant %" PRIu32 ": VkResult %d", i, (int)s->result);
        break;
      }
      variant->info.layout = own.pipeline_layout;
      variant->info.renderPass = own.render_pass;
    }
    if (s->vk->creation_feedback)
      variant->info.pNext = &fci;
    if (into_fresh && !in_cache) {
      VkPipelineCacheCreateInfo pci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
      if ((s->result = vkCreatePipelineCache(s->vk->device, &pci, NULL, &fresh)) != VK_SUCCESS) {
        log_err("vkCreatePipelineCache: VkResult %d", (int)s->result);
        if (own_objects)
          objects_destroy(NULL, s->vk, &own);
        break;
      }
      s->fresh_made++;
    }
    VkPipelineCache use = into_fresh ? fresh : s->cache;
    s->result =
        vkCreateGraphicsPipelines(s->vk->device, use, 1, &variant->info, NULL, &s->pipelines[i]);
    /* Counted by the handle used, so that a test sees one gone astray. */
    s->fresh_pipelines += s->result == VK_SUCCESS && use != s->cache;
    /* A fresh cache is read back once its group is full (and after each
     * pipeline with --read-each); on a failure it is destroyed unread.
     * A group the thread leaves part full is read after the loop. */
    if (into_fresh) {
      int full = ++in_cache == s->fresh_caches || s->result != VK_SUCCESS;
      if (full || s->read_each)
        fresh_cache_read(s, fresh);
      if (full) {
        vkDestroyPipelineCache(s->vk->device, fresh, NULL);
        fresh = VK_NULL_HANDLE;
        in_cache = 0;
      }
    }
    if (own_objects)
      objects_destroy(NULL, s->vk, &own);
    if (s->result == VK_SUCCESS && s->destroy_each && probed) {
      vkDestroyPipeline(s->vk->device, s->pipelines[i], NULL);
      s->pipelines[i] = VK_NULL_HANDLE;
    }
    s->half_ms[probed] += now_ms() - t0;
    s->half_n[probed]++;
    if (s->result != VK_SUCCESS) {
      log_err("vkCreateGraphicsPipelines(variant %" PRIu32 "): VkResult %d", i, (int)s->result);
      break;
    }
    s->hits += (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
               (fb.flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT);
  }
  if (in_cache) {
    /* The probed half's cost too. */
    double t0 = now_ms();
    if (!s->read_each)
      fresh_cache_read(s, fresh);
    vkDestroyPipelineCache(s->vk->device, fresh, NULL);
    s->half_ms[1] += now_ms() - t0;
  }
  free(variant);
  return NULL;
}

/*
 * --plain: the same pipelines with no pcache code, as an app that never
 * heard of pcache builds them: plain objects, vkCreateGraphicsPipelines
 * with the app's own cache (--cache-file) or none, on --threads threads
 * (bench/run-replay.sh compares the replayer with it, thread for thread).
 * With PCACHE_LAYER=1 the Vulkan layer serves it; its report
 * (PCACHE_LAYER_STATS=1) says how.
 */
static int run_plain(const demo_options *opts, const demo_vk *vk, double device_ms) {
  demo_objects objs = {0};
  VkPipeline *pipelines = calloc(opts->pipelines, sizeof *pipelines);
  plain_slice *slices = calloc(opts->threads, sizeof *slices);
  uint32_t *order = calloc(opts->pipelines, sizeof *order);
  VkPipelineCache cache = VK_NULL_HANDLE;
  size_t loaded_bytes = 0, saved_bytes = 0, fresh_bytes = 0;
  uint32_t fresh_made = 0, fresh_pipelines = 0;
  double half_ms[2] = {0, 0};
  uint32_t half_n[2] = {0, 0};
  uint32_t hits = 0, started = 0;
  double t0 = now_ms(), load_ms, create_ms, save_ms = 0;
  int exit_code = 1, failed = 0;

  if (opts->cache_file)
    cache = plain_cache_load(vk, opts->cache_file, &loaded_bytes);
  load_ms = now_ms() - t0;
  if (!slices || !pipelines || !order || objects_create(NULL, vk, &objs) != VK_SUCCESS) {
    log_err("out of memory, or the driver refused the demo's objects");
    goto out;
  }
  for (uint32_t i = 0; i < opts->pipelines; i++)
    order[i] = i;
  if (opts->shuffle) {
    /* Fisher-Yates with a fixed LCG: the same order every run. */
    uint64_t x = 0x9e3779b97f4a7c15u;
    for (uint32_t i = opts->pipelines - 1; i > 0; i--) {
      uint32_t j, t;
      x = x * 6364136223846793005u + 1442695040888963407u;
      j = (uint32_t)((x >> 33) % (i + 1));
      t = order[i], order[i] = order[j], order[j] = t;
    }
  }
  t0 = now_ms();
  for (; started < opts->threads; started++) {
    slices[started] = (plain_slice){.vk = vk,
                                    .objs = &objs,
                                    .cache = cache,
                                    .pipelines = pipelines,
                                    .order = order,
                                    .fresh_caches = opts->fresh_caches,
                                    .fresh_objects = opts->fresh_objects,
                                    .destroy_each = opts->destroy_each,
                                    .alternate = opts->alternate,
                                    .read_each = opts->read_each,
                                    .first = started,
                                    .step = opts->threads,
                                    .count = opts->pipelines};
    if (pthread_create(&slices[started].thread, NULL, plain_slice_main, &slices[started]) != 0) {
      log_err("cannot start a thread");
      failed = 1;
      break;
    }
  }
  for (uint32_t k = 0; k < started; k++) {
    pthread_join(slices[k].thread, NULL);
    failed |= slices[k].result != VK_SUCCESS;
    hits += slices[k].hits;
    fresh_bytes += slices[k].fresh_bytes;
    fresh_made += slices[k].fresh_made;
    fresh_pipelines += slices[k].fresh_pipelines;
    for (int h = 0; h < 2; h++) {
      half_ms[h] += slices[k].half_ms[h];
      half_n[h] += slices[k].half_n[h];
    }
  }
  if (failed)
    goto out;
  create_ms = now_ms() - t0;
  if (cache != VK_NULL_HANDLE) {
    double s0 = now_ms();
    plain_cache_save(vk, cache, opts->cache_file);
    save_ms = now_ms() - s0;
    (void)vkGetPipelineCacheData(vk->device, cache, &saved_bytes, NULL);
  }

  printf("mode=plain\n");
  printf("device=%s\n", vk->props.deviceName);
  printf("device_type=%s\n", is_software_driver(&vk->props) ? "cpu" : "gpu");
  printf("creation_feedback=%d\n", vk->creation_feedback);
  printf("pipelines=%" PRIu32 "\n", opts->pipelines);
  printf("device_ms=%.3f\n", device_ms);
  printf("cache_load_ms=%.3f\n", load_ms);
  printf("cache_loaded_bytes=%zu\n", loaded_bytes);
  printf("create_ms=%.3f\n", create_ms);
  printf("threads=%" PRIu32 "\n", opts->threads);
  printf("shuffled=%d\n", opts->shuffle);
  printf("fresh_caches=%" PRIu32 "\n", opts->fresh_caches);
  printf("fresh_caches_made=%" PRIu32 "\n", fresh_made);
  printf("fresh_cache_pipelines=%" PRIu32 "\n", fresh_pipelines);
  printf("fresh_cache_bytes=%zu\n", fresh_bytes);
  printf("fresh_objects=%d\n", opts->fresh_objects);
  printf("destroy_each=%d\n", opts->destroy_each);
  {
    /* The process's faults and switches so far, to set beside
     * pcache-replay's closing line. */
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
      printf("minor_faults=%ld\nvoluntary_switches=%ld\ninvoluntary_switches=%ld\n", ru.ru_minflt,
             ru.ru_nvcsw, ru.ru_nivcsw);
  }
  if (opts->alternate) {
    /* Per pipeline, each half: what the probes cost within this process. */
    printf("alternate_unprobed_ms_per_pipeline=%.4f\n", half_n[0] ? half_ms[0] / half_n[0] : 0);
    printf("alternate_probed_ms_per_pipeline=%.4f\n", half_n[1] ? half_ms[1] / half_n[1] : 0);
  }
  printf("ms_per_pipeline=%.4f\n", create_ms / opts->pipelines);
  printf("startup_ms=%.3f\n", device_ms + load_ms + create_ms);
  printf("driver_cache_hits=%" PRIu32 "\n", hits);
  printf("cache_data_bytes=%zu\n", saved_bytes);
  printf("cache_save_ms=%.3f\n", save_ms);
  printf("\n%s --plain: %" PRIu32 " pipelines on %s, %.3f ms per pipeline, %" PRIu32
         " driver cache hits\n",
         DEMO_NAME, opts->pipelines, vk->props.deviceName, create_ms / opts->pipelines, hits);
  exit_code = 0;
out:
  /* Slots of pipelines never made are VK_NULL_HANDLE (calloc). */
  for (uint32_t i = 0; pipelines && i < opts->pipelines; i++)
    vkDestroyPipeline(vk->device, pipelines[i], NULL);
  objects_destroy(NULL, vk, &objs);
  if (cache != VK_NULL_HANDLE)
    vkDestroyPipelineCache(vk->device, cache, NULL);
  free(pipelines);
  free(slices);
  free(order);
  return exit_code;
}

int main(int argc, char **argv) {
  demo_options opts;
  demo_vk vk = {0};
  demo_objects objs = {0};
  demo_variant *variant = NULL;
  VkPipeline *pipelines = NULL;
  pcache_client *client = NULL;
  pcache_device *pdev = NULL;
  pcache_tier *tier = NULL;
  pcache_stats st;
  pcache_counters counters = {0};
  uint32_t tier_mismatch = 0, tier_missing = 0;
  size_t cache_bytes = 0;
  double t0, create_ms, tier_ms;
  int r, flush_r, exit_code = 1;
  VkResult vr;

  r = parse_args(argc, argv, &opts);
  if (r != 0)
    return r > 0 ? 0 : 2;

  variant = malloc(sizeof *variant);
  pipelines = calloc(opts.pipelines, sizeof *pipelines);
  if (!variant || !pipelines) {
    log_err("out of memory");
    goto out_free;
  }

  t0 = now_ms();
  if (vk_init(&opts, &vk) < 0)
    goto out_free;
  if (opts.plain) {
    exit_code = run_plain(&opts, &vk, now_ms() - t0);
    goto out_vk;
  }

  pcache_client_options copts = {
      .struct_size = sizeof(pcache_client_options),
      .app_name = opts.app_name,
      .application_name = opts.app_name,
      .disable_daemon = opts.no_daemon,
  };
  r = pcache_client_open(&copts, &client);
  if (r < 0) {
    log_err("pcache_client_open: %s", pcache_strerror(r));
    goto out_vk;
  }

  /* struct_size: without it the library reads the 0.1 layout, which has
   * no instance_api_version, and so never asks a 1.0 instance's device
   * for its UUID and driver names (pcachectl list would show "-"). */
  pcache_device_info dinfo = {
      .struct_size = sizeof dinfo,
      .instance = vk.instance,
      .physical_device = vk.physical_device,
      .device = vk.device,
      .creation_feedback = vk.creation_feedback,
      .instance_api_version = vk.api_version,
      .cache_control = vk.cache_control,
  };
  r = pcache_device_create(client, &dinfo, &pdev);
  if (r < 0) {
    log_err("pcache_device_create: %s", pcache_strerror(r));
    goto out_client;
  }

  vr = objects_create(pdev, &vk, &objs);
  if (vr != VK_SUCCESS) {
    log_err("creating shader modules and layouts: VkResult %d", (int)vr);
    goto out_device;
  }

  /* Pass 1: the full create-info path, as an engine's loading screen does. */
  t0 = now_ms();
  for (uint32_t i = 0; i < opts.pipelines; i++) {
    variant_fill(variant, &objs, i);
    vr = pcache_get_graphics_pipeline(pdev, &variant->info, &pipelines[i]);
    if (vr != VK_SUCCESS) {
      log_err("pcache_get_graphics_pipeline(variant %" PRIu32 "): VkResult %d", i, (int)vr);
      goto out_objects;
    }
  }
  create_ms = now_ms() - t0;
  pcache_device_end_frame(pdev);

  /*
   * Pass 2: a render loop keyed by the app's own integers. The first lookup
   * of each draw key misses the tier and finds the pipeline by its state
   * hash; after end_frame every lookup is one lock-free probe.
   */
  t0 = now_ms();
  r = pcache_device_select_tier(pdev, DEMO_GLOBAL_KEY, &tier);
  if (r < 0) {
    log_err("pcache_device_select_tier: %s", pcache_strerror(r));
    goto out_objects;
  }
  for (uint32_t i = 0; i < opts.pipelines; i++) {
    VkPipeline p = VK_NULL_HANDLE;
    variant_fill(variant, &objs, i);
    vr = pcache_tier_get_graphics_pipeline(tier, i, &variant->info, &p);
    if (vr != VK_SUCCESS) {
      log_err("pcache_tier_get_graphics_pipeline(%" PRIu32 "): VkResult %d", i, (int)vr);
      goto out_objects;
    }
    if (p != pipelines[i])
      tier_mismatch++;
  }
  pcache_device_end_frame(pdev);
  for (uint32_t i = 0; i < opts.pipelines; i++) {
    VkPipeline p = pcache_tier_lookup(tier, i);
    if (p == VK_NULL_HANDLE)
      tier_missing++;
    else if (p != pipelines[i])
      tier_mismatch++;
  }
  tier_ms = now_ms() - t0;
  pcache_device_end_frame(pdev);

  /* Uploads run in the background; wait for them so the next run finds
   * them (a real app would just exit, or keep running). One flush waits at
   * most the client's timeout; a loaded machine can take longer to commit,
   * so the demo tries for up to five seconds before it gives up. */
  t0 = now_ms();
  do
    flush_r = pcache_device_flush(pdev);
  while (flush_r == -ETIMEDOUT && now_ms() - t0 < 5000.0);

  r = pcache_device_get_stats(pdev, &st);
  if (r == 0)
    r = pcache_device_get_counters(pdev, &counters);
  if (r < 0) {
    log_err("pcache_device_get_stats: %s", pcache_strerror(r));
    goto out_objects;
  }
  if (vkGetPipelineCacheData(vk.device, pcache_device_pipeline_cache(pdev), &cache_bytes, NULL) !=
      VK_SUCCESS)
    cache_bytes = 0;

  /* Machine-readable first (scripts/demo.sh reads these). */
  printf("device=%s\n", vk.props.deviceName);
  printf("device_type=%s\n", is_software_driver(&vk.props) ? "cpu" : "gpu");
  printf("creation_feedback=%d\n", vk.creation_feedback);
  printf("daemon_connected=%d\n", pcache_client_connected(client));
  printf("pipelines=%" PRIu32 "\n", opts.pipelines);
  printf("create_ms=%.3f\n", create_ms);
  printf("ms_per_pipeline=%.3f\n", create_ms / opts.pipelines);
  printf("tier_pass_ms=%.3f\n", tier_ms);
  printf("daemon_hits=%" PRIu64 "\n", st.daemon_hits);
  printf("driver_cache_hits=%" PRIu64 "\n", st.driver_cache_hits);
  printf("compiles=%" PRIu64 "\n", st.compiles);
  printf("driver_first=%d\n", vk.cache_control);
  printf("driver_hits=%" PRIu64 "\n", counters.driver_hits);
  printf("staged=%" PRIu64 "\n", counters.staged);
  printf("misses=%" PRIu64 "\n", st.misses);
  printf("hits_app_key=%" PRIu64 "\n", st.hits_app_key);
  printf("hits_create_info=%" PRIu64 "\n", st.hits_create_info);
  printf("tier_hits=%" PRIu64 "\n", st.hits_app_key + st.hits_create_info);
  printf("prefetched=%" PRIu64 "\n", st.prefetched);
  printf("rejected_blobs=%" PRIu64 "\n", st.rejected_blobs);
  printf("unhashable=%" PRIu64 "\n", st.unhashable);
  printf("uploaded=%" PRIu64 "\n", st.uploaded);
  printf("upload_queue=%" PRIu64 "\n", st.upload_queue);
  printf("flush=%s\n", flush_r == 0 ? "ok" : pcache_err_name(flush_r));
  printf("cache_data_bytes=%zu\n", cache_bytes);
  printf("tier_mismatches=%" PRIu32 "\n", tier_mismatch + tier_missing);

  printf("\n%s: %" PRIu32 " pipelines on %s, %.3f ms per pipeline\n", DEMO_NAME, opts.pipelines,
         vk.props.deviceName, create_ms / opts.pipelines);
  printf("  daemon: %s, %" PRIu64 " blobs prefetched, %" PRIu64 " daemon hits, %" PRIu64
         " uploaded\n",
         pcache_client_connected(client) ? "connected" : "not connected", st.prefetched,
         st.daemon_hits, st.uploaded);
  printf("  driver: %" PRIu64 " served by its own caches (asked first%s), %" PRIu64
         " built without a blob, %" PRIu64 " cache hits (creation feedback%s)\n",
         counters.driver_hits, vk.cache_control ? "" : ": unavailable", st.compiles,
         st.driver_cache_hits, vk.creation_feedback ? "" : " unavailable");
  printf("  tiers:  %" PRIu64 " hits by app key, %" PRIu64 " by create info\n", st.hits_app_key,
         st.hits_create_info);
  if (is_software_driver(&vk.props) && st.driver_cache_hits == 0)
    printf("  note:   a CPU driver: its pipeline cache holds only a %zu-byte header, it\n"
           "          compiles every pipeline every time and never reports a cache hit,\n"
           "          so \"compiles\" (pipelines pcache had no blob for) is not what the\n"
           "          driver compiled: it compiled all %" PRIu32 ". The flow is real; the\n"
           "          speed-up needs a GPU driver.\n",
           cache_bytes, opts.pipelines);

  if (tier_mismatch || tier_missing) {
    log_err("%" PRIu32 " tier lookups missing, %" PRIu32 " gave another pipeline", tier_missing,
            tier_mismatch);
    goto out_objects;
  }
  exit_code = 0;

out_objects:
  objects_destroy(pdev, &vk, &objs);
out_device:
  pcache_device_destroy(pdev);
out_client:
  pcache_client_close(client);
out_vk:
  vk_fini(&vk);
out_free:
  free(pipelines);
  free(variant);
  return exit_code;
}
