/*
 * bench_gpl - misses without a stall (pcache_device_info.fast_link) on
 * pcache-demo's heavy set: its PBR variants (examples/shaders, the same
 * state as the demo's demo_variant_fill: blend, topology, cull, alpha
 * test, and a light count per 16 variants).
 *
 * Three measures, no daemon (the device cache only) and, as the scripts
 * run it, the driver's disk cache off:
 *  1. time to a usable pipeline on a miss: N misses through a context with
 *     PCACHE_FAST_LINK_NEVER (the monolithic compile) and, on a second
 *     VkDevice, through PCACHE_FAST_LINK_THEN_OPTIMIZE (parts + fast link);
 *     the first fast miss builds all four parts, later ones mostly link;
 *     and, on a third VkDevice, the same misses after each pipeline was
 *     prepared (pcache_prepare_graphics_pipeline, as at ANGLE's program
 *     link: its parts built ahead), so that a miss only links
 *     (gpl_prepared_*; gpl_prepare_* is the time the preparing took, off
 *     the draw path);
 *  2. frames until the optimized pipelines are in: a frame loop of
 *     --frame-ms each calling pcache_device_end_frame, until every miss
 *     was swapped (the counters' swap_frames_total, swap_ns_*);
 *  3. the draw cost of the linked against the optimized pipeline: --draws
 *     draws of a 64x64-quad grid at 256x256 with each, between two
 *     timestamp queries, median of 5.
 *
 * And, with --phase (see known_phase), known parts in a new process.
 *
 *   bench_gpl [--pipelines N] [--frame-ms MS] [--draws D] [--threads T]
 *             [--phase prepare|known]
 *
 * Prints key=value lines (gpl_*). One file over ~600 lines would be too
 * much; this one stays under by drawing with the demo's own objects.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpl_shaders.h"

#include "bench_gpl_draw.h"
#include "bench_gpl_common.h"

static void vk_init(vk_t *v) {
  VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
                           .pApplicationName = "bench_gpl",
                           .apiVersion = VK_API_VERSION_1_3};
  VkInstanceCreateInfo ici = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
                              .pApplicationInfo = &app};
  VkPhysicalDevice devs[8];
  uint32_t n = 8, index = getenv("PCACHE_BENCH_DEVICE") ? atoi(getenv("PCACHE_BENCH_DEVICE")) : 0;
  VkQueueFamilyProperties fam[16];
  VkPhysicalDeviceProperties props;
  CHECK(vkCreateInstance(&ici, NULL, &v->instance));
  CHECK(vkEnumeratePhysicalDevices(v->instance, &n, devs));
  if (index >= n)
    exit(1);
  v->phys = devs[index];
  vkGetPhysicalDeviceProperties(v->phys, &props);
  v->timestamp_period = props.limits.timestampPeriod;
  printf("gpl_device=%s\ngpl_driver_version=%u\n", props.deviceName, props.driverVersion);
  n = 16;
  vkGetPhysicalDeviceQueueFamilyProperties(v->phys, &n, fam);
  for (v->family = 0; v->family < n; v->family++)
    if (fam[v->family].queueFlags & VK_QUEUE_GRAPHICS_BIT)
      break;
}

/* A VkDevice with graphics pipeline libraries enabled. */
static VkDevice device_new(const vk_t *v) {
  const char *ext[2] = {VK_KHR_PIPELINE_LIBRARY_EXTENSION_NAME,
                        VK_EXT_GRAPHICS_PIPELINE_LIBRARY_EXTENSION_NAME};
  VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT gpl = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT,
      .graphicsPipelineLibrary = VK_TRUE};
  float prio = 1;
  VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
                               .queueFamilyIndex = v->family,
                               .queueCount = 1,
                               .pQueuePriorities = &prio};
  VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
                            .pNext = &gpl,
                            .queueCreateInfoCount = 1,
                            .pQueueCreateInfos = &q,
                            .enabledExtensionCount = 2,
                            .ppEnabledExtensionNames = ext};
  VkDevice d;
  CHECK(vkCreateDevice(v->phys, &dci, NULL, &d));
  return d;
}

static void objects_make(pcache_device *p, objects *o) {
  VkShaderModuleCreateInfo vs = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = sizeof gpl_shaders_mesh_vert,
                                 .pCode = gpl_shaders_mesh_vert};
  VkShaderModuleCreateInfo fs = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                 .codeSize = sizeof gpl_shaders_pbr_frag,
                                 .pCode = gpl_shaders_pbr_frag};
  VkSamplerCreateInfo sci = {.sType = VK_STRUCTURE_TYPE_SAMPLER_CREATE_INFO,
                             .magFilter = VK_FILTER_LINEAR,
                             .minFilter = VK_FILTER_LINEAR,
                             .mipmapMode = VK_SAMPLER_MIPMAP_MODE_LINEAR,
                             .maxLod = VK_LOD_CLAMP_NONE};
  CHECK(pcache_create_shader_module(p, &vs, NULL, &o->vert));
  CHECK(pcache_create_shader_module(p, &fs, NULL, &o->frag));
  CHECK(pcache_create_sampler(p, &sci, NULL, &o->sampler));
  VkDescriptorSetLayoutBinding b[2] = {
      {0, VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, 1,
       VK_SHADER_STAGE_VERTEX_BIT | VK_SHADER_STAGE_FRAGMENT_BIT, NULL},
      {1, VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 1, VK_SHADER_STAGE_FRAGMENT_BIT, &o->sampler}};
  VkDescriptorSetLayoutCreateInfo dsl = {.sType =
                                             VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                         .bindingCount = 2,
                                         .pBindings = b};
  CHECK(pcache_create_descriptor_set_layout(p, &dsl, NULL, &o->set_layout));
  VkPushConstantRange push = {VK_SHADER_STAGE_VERTEX_BIT, 0, 64};
  VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                   .setLayoutCount = 1,
                                   .pSetLayouts = &o->set_layout,
                                   .pushConstantRangeCount = 1,
                                   .pPushConstantRanges = &push};
  CHECK(pcache_create_pipeline_layout(p, &pl, NULL, &o->layout));
  VkAttachmentDescription att[2] = {
      {0, VK_FORMAT_R8G8B8A8_UNORM, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_STORE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_TRANSFER_SRC_OPTIMAL},
      {0, DEPTH_FORMAT, VK_SAMPLE_COUNT_1_BIT, VK_ATTACHMENT_LOAD_OP_CLEAR,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_ATTACHMENT_LOAD_OP_DONT_CARE,
       VK_ATTACHMENT_STORE_OP_DONT_CARE, VK_IMAGE_LAYOUT_UNDEFINED,
       VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL}};
  VkAttachmentReference cref = {0, VK_IMAGE_LAYOUT_COLOR_ATTACHMENT_OPTIMAL};
  VkAttachmentReference dref = {1, VK_IMAGE_LAYOUT_DEPTH_STENCIL_ATTACHMENT_OPTIMAL};
  VkSubpassDescription sub = {.pipelineBindPoint = VK_PIPELINE_BIND_POINT_GRAPHICS,
                              .colorAttachmentCount = 1,
                              .pColorAttachments = &cref,
                              .pDepthStencilAttachment = &dref};
  VkRenderPassCreateInfo rp = {.sType = VK_STRUCTURE_TYPE_RENDER_PASS_CREATE_INFO,
                               .attachmentCount = 2,
                               .pAttachments = att,
                               .subpassCount = 1,
                               .pSubpasses = &sub};
  CHECK(pcache_create_render_pass(p, &rp, NULL, &o->pass));
}

/* pcache-demo's variant i (examples/demo_pipelines.c, demo_variant_fill). */
typedef struct variant {
  VkPipelineShaderStageCreateInfo stages[2];
  VkSpecializationMapEntry spec_entries[2];
  uint32_t spec_data[2];
  VkSpecializationInfo spec;
  VkVertexInputBindingDescription binding;
  VkVertexInputAttributeDescription attrs[3];
  VkPipelineVertexInputStateCreateInfo vi;
  VkPipelineInputAssemblyStateCreateInfo ia;
  VkPipelineViewportStateCreateInfo vp;
  VkPipelineRasterizationStateCreateInfo rs;
  VkPipelineMultisampleStateCreateInfo ms;
  VkPipelineDepthStencilStateCreateInfo ds;
  VkPipelineColorBlendAttachmentState ba;
  VkPipelineColorBlendStateCreateInfo cb;
  VkDynamicState dyn[2];
  VkPipelineDynamicStateCreateInfo dy;
  VkGraphicsPipelineCreateInfo info;
} variant;

static void variant_make(variant *v, const objects *o, uint32_t i) {
  int blend = i & 1, strip = (i >> 1) & 1, cull = (i >> 2) & 1;
  memset(v, 0, sizeof *v);
  v->spec_data[0] = 1 + (i >> 4);
  v->spec_data[1] = (i >> 3) & 1;
  v->spec_entries[0] = (VkSpecializationMapEntry){0, 0, 4};
  v->spec_entries[1] = (VkSpecializationMapEntry){1, 4, 4};
  v->spec = (VkSpecializationInfo){2, v->spec_entries, sizeof v->spec_data, v->spec_data};
  v->stages[0] =
      (VkPipelineShaderStageCreateInfo){VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                        NULL,
                                        0,
                                        VK_SHADER_STAGE_VERTEX_BIT,
                                        o->vert,
                                        "main",
                                        NULL};
  v->stages[1] =
      (VkPipelineShaderStageCreateInfo){VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                                        NULL,
                                        0,
                                        VK_SHADER_STAGE_FRAGMENT_BIT,
                                        o->frag,
                                        "main",
                                        &v->spec};
  v->binding = (VkVertexInputBindingDescription){0, 32, VK_VERTEX_INPUT_RATE_VERTEX};
  v->attrs[0] = (VkVertexInputAttributeDescription){0, 0, VK_FORMAT_R32G32B32_SFLOAT, 0};
  v->attrs[1] = (VkVertexInputAttributeDescription){1, 0, VK_FORMAT_R32G32B32_SFLOAT, 12};
  v->attrs[2] = (VkVertexInputAttributeDescription){2, 0, VK_FORMAT_R32G32_SFLOAT, 24};
  v->vi = (VkPipelineVertexInputStateCreateInfo){
      VK_STRUCTURE_TYPE_PIPELINE_VERTEX_INPUT_STATE_CREATE_INFO,
      NULL,
      0,
      1,
      &v->binding,
      3,
      v->attrs};
  v->ia = (VkPipelineInputAssemblyStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_INPUT_ASSEMBLY_STATE_CREATE_INFO,
      .topology =
          strip ? VK_PRIMITIVE_TOPOLOGY_TRIANGLE_STRIP : VK_PRIMITIVE_TOPOLOGY_TRIANGLE_LIST};
  v->vp = (VkPipelineViewportStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_VIEWPORT_STATE_CREATE_INFO,
      .viewportCount = 1,
      .scissorCount = 1};
  v->rs = (VkPipelineRasterizationStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_RASTERIZATION_STATE_CREATE_INFO,
      .cullMode = cull ? VK_CULL_MODE_BACK_BIT : VK_CULL_MODE_NONE,
      .frontFace = VK_FRONT_FACE_COUNTER_CLOCKWISE,
      .lineWidth = 1};
  v->ms = (VkPipelineMultisampleStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_MULTISAMPLE_STATE_CREATE_INFO,
      .rasterizationSamples = VK_SAMPLE_COUNT_1_BIT};
  v->ds = (VkPipelineDepthStencilStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_DEPTH_STENCIL_STATE_CREATE_INFO,
      .depthTestEnable = VK_TRUE,
      .depthWriteEnable = blend ? VK_FALSE : VK_TRUE,
      .depthCompareOp = VK_COMPARE_OP_LESS_OR_EQUAL,
      .maxDepthBounds = 1};
  v->ba = (VkPipelineColorBlendAttachmentState){blend,
                                                VK_BLEND_FACTOR_SRC_ALPHA,
                                                VK_BLEND_FACTOR_ONE_MINUS_SRC_ALPHA,
                                                VK_BLEND_OP_ADD,
                                                VK_BLEND_FACTOR_ONE,
                                                VK_BLEND_FACTOR_ZERO,
                                                VK_BLEND_OP_ADD,
                                                0xf};
  v->cb = (VkPipelineColorBlendStateCreateInfo){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_COLOR_BLEND_STATE_CREATE_INFO,
      .attachmentCount = 1,
      .pAttachments = &v->ba};
  v->dyn[0] = VK_DYNAMIC_STATE_VIEWPORT;
  v->dyn[1] = VK_DYNAMIC_STATE_SCISSOR;
  v->dy = (VkPipelineDynamicStateCreateInfo){VK_STRUCTURE_TYPE_PIPELINE_DYNAMIC_STATE_CREATE_INFO,
                                             NULL, 0, 2, v->dyn};
  v->info = (VkGraphicsPipelineCreateInfo){.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                           .stageCount = 2,
                                           .pStages = v->stages,
                                           .pVertexInputState = &v->vi,
                                           .pInputAssemblyState = &v->ia,
                                           .pViewportState = &v->vp,
                                           .pRasterizationState = &v->rs,
                                           .pMultisampleState = &v->ms,
                                           .pDepthStencilState = &v->ds,
                                           .pColorBlendState = &v->cb,
                                           .pDynamicState = &v->dy,
                                           .layout = o->layout,
                                           .renderPass = o->pass,
                                           .basePipelineIndex = -1};
}

static pcache_device *context_with(pcache_client *client, const vk_t *v, VkDevice d, uint32_t mode,
                                   uint32_t threads) {
  pcache_device_info info = PCACHE_STRUCT_INIT(pcache_device_info);
  pcache_device *p;
  info.instance = v->instance;
  info.physical_device = v->phys;
  info.device = d;
  info.get_instance_proc_addr = vkGetInstanceProcAddr;
  info.instance_api_version = VK_API_VERSION_1_3;
  info.fast_link = mode;
  info.fast_link_threads = threads;
  if (pcache_device_create(client, &info, &p) != 0)
    exit(1);
  return p;
}

static pcache_device *context(const vk_t *v, VkDevice d, uint32_t mode, uint32_t threads) {
  return context_with(NULL, v, d, mode, threads);
}

/* N misses through p; their times (ns) to ret_ns, the pipelines to ret. */
static void misses(pcache_device *p, const objects *o, uint32_t n, uint64_t *ret_ns,
                   VkPipeline *ret) {
  variant *v = malloc(sizeof *v);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t t0;
    variant_make(v, o, i);
    t0 = now_ns();
    CHECK(pcache_get_graphics_pipeline(p, &v->info, &ret[i]));
    ret_ns[i] = now_ns() - t0;
  }
  free(v);
}

/* The same N pipelines prepared through p (their parts built, nothing
 * linked); their times (ns) to ret_ns unless it is NULL. */
static void prepares(pcache_device *p, const objects *o, uint32_t n, uint64_t *ret_ns) {
  variant *v = malloc(sizeof *v);
  for (uint32_t i = 0; i < n; i++) {
    uint64_t t0;
    variant_make(v, o, i);
    t0 = now_ns();
    CHECK(pcache_prepare_graphics_pipeline(p, &v->info));
    if (ret_ns)
      ret_ns[i] = now_ns() - t0;
  }
  free(v);
}

static void report_times(const char *name, uint64_t *ns, uint32_t n) {
  uint64_t sum = 0, first = ns[0];
  for (uint32_t i = 0; i < n; i++)
    sum += ns[i];
  qsort(ns, n, sizeof *ns, cmp_u64);
  printf("gpl_%s_first_ms=%.3f\ngpl_%s_mean_ms=%.3f\ngpl_%s_median_ms=%.3f\n", name, first / 1e6,
         name, sum / 1e6 / n, name, ns[n / 2] / 1e6);
}

/* Known parts in a new process (--phase, with pcached at $PCACHE_SOCKET):
 * "prepare" prepares every pipeline through the daemon, so their parts
 * are uploaded under their part hashes, and nothing else; "known", the
 * next process, times the monolithic compile (no daemon, a VkDevice of
 * its own) against the same misses through the daemon, each a
 * combination this process never linked, of four parts an earlier run
 * made. */
static int known_phase(const vk_t *v, const char *phase, uint32_t n, uint32_t threads) {
  pcache_client_options opts = PCACHE_STRUCT_INIT(pcache_client_options);
  pcache_client *client;
  pcache_counters c;
  pcache_stats s;
  objects o;
  VkDevice d = device_new(v);
  pcache_device *p;
  opts.app_name = "bench_gpl";
  opts.timeout_ms = 5000;
  if (pcache_client_open(&opts, &client) != 0 || !pcache_client_connected(client)) {
    fprintf(stderr, "bench_gpl: no pcached at $PCACHE_SOCKET\n");
    return 1;
  }
  if (!strcmp(phase, "prepare")) {
    uint64_t t0 = now_ns();
    p = context_with(client, v, d, PCACHE_FAST_LINK_THEN_OPTIMIZE, threads);
    objects_make(p, &o);
    prepares(p, &o, n, NULL);
    while (pcache_device_flush(p) != 0)
      ;
    pcache_device_get_counters(p, &c);
    printf("gpl_known_prepare_ms=%.1f\ngpl_known_prepare_parts=%" PRIu64 "\n",
           (now_ns() - t0) / 1e6, c.parts_made);
  } else {
    VkDevice dm = device_new(v);
    pcache_device *pm = context(v, dm, PCACHE_FAST_LINK_NEVER, 0);
    objects om;
    uint64_t *mono_ns = calloc(n, sizeof *mono_ns), *known_ns = calloc(n, sizeof *known_ns);
    uint64_t mono_sum = 0, known_sum = 0;
    VkPipeline *out = calloc(n, sizeof *out);
    objects_make(pm, &om);
    misses(pm, &om, n, mono_ns, out);
    p = context_with(client, v, d, PCACHE_FAST_LINK_THEN_OPTIMIZE, threads);
    objects_make(p, &o);
    misses(p, &o, n, known_ns, out);
    pcache_device_get_counters(p, &c);
    pcache_device_get_stats(p, &s);
    for (uint32_t i = 0; i < n; i++) {
      mono_sum += mono_ns[i];
      known_sum += known_ns[i];
    }
    printf("gpl_known_fast_links=%" PRIu64 "\ngpl_known_parts_made=%" PRIu64
           "\ngpl_known_compiles=%" PRIu64 "\ngpl_known_prefetched=%" PRIu64 "\n",
           c.fast_links, c.parts_made, s.compiles, s.prefetched);
    report_times("known_mono", mono_ns, n);
    report_times("known", known_ns, n);
    /* The target's ratio for combinations of parts an earlier run made. */
    printf("gpl_known_over_mono=%.4f\n", (double)known_sum / (double)mono_sum);
    pcache_device_destroy(pm);
    vkDestroyDevice(dm, NULL);
    free(mono_ns);
    free(known_ns);
    free(out);
  }
  pcache_device_destroy(p);
  vkDestroyDevice(d, NULL);
  pcache_client_close(client);
  return 0;
}

int main(int argc, char **argv) {
  uint32_t n = 32, frame_ms = 16, draws = 20, threads = 1, frames = 0;
  const char *phase = NULL;
  vk_t v;
  objects oa, ob;
  VkDevice da, db, dc;
  pcache_device *pa, *pb, *pc;
  objects oc;
  pcache_counters c;
  uint64_t *mono_ns, *fast_ns, *prep_ns, *prepared_ns, mono_sum = 0, fast_sum = 0, prepared_sum = 0;
  VkPipeline *mono, *linked;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--pipelines"))
      n = (uint32_t)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--frame-ms"))
      frame_ms = (uint32_t)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--draws"))
      draws = (uint32_t)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--threads"))
      threads = (uint32_t)atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--phase"))
      phase = argv[i + 1];
  }
  if (n == 0 || (phase && strcmp(phase, "prepare") != 0 && strcmp(phase, "known") != 0))
    return 2;
  if (phase) {
    vk_init(&v);
    int r = known_phase(&v, phase, n, threads);
    vkDestroyInstance(v.instance, NULL);
    return r;
  }
  mono_ns = calloc(n, sizeof *mono_ns);
  fast_ns = calloc(n, sizeof *fast_ns);
  prep_ns = calloc(n, sizeof *prep_ns);
  prepared_ns = calloc(n, sizeof *prepared_ns);
  mono = calloc(n, sizeof *mono);
  linked = calloc(n, sizeof *linked);
  vk_init(&v);

  /* 1. The monolithic compile, then the fast link, each on a VkDevice of
   * its own (no driver memory shared between them). */
  da = device_new(&v);
  pa = context(&v, da, PCACHE_FAST_LINK_NEVER, 0);
  objects_make(pa, &oa);
  misses(pa, &oa, n, mono_ns, mono);
  db = device_new(&v);
  pb = context(&v, db, PCACHE_FAST_LINK_THEN_OPTIMIZE, threads);
  objects_make(pb, &ob);
  uint64_t burst0 = now_ns();
  misses(pb, &ob, n, fast_ns, linked);
  c.fast_links = 0;
  pcache_device_get_counters(pb, &c);
  if (c.fast_links != n) {
    fprintf(stderr, "bench_gpl: %" PRIu64 " fast links of %u: no fast linking here?\n",
            c.fast_links, n);
    return 1;
  }
  /* Prepared: every pipeline's parts built ahead, then the misses. */
  dc = device_new(&v);
  pc = context(&v, dc, PCACHE_FAST_LINK_THEN_OPTIMIZE, threads);
  objects_make(pc, &oc);
  prepares(pc, &oc, n, prep_ns);
  VkPipeline *prepared = calloc(n, sizeof *prepared);
  misses(pc, &oc, n, prepared_ns, prepared);
  pcache_device_get_counters(pc, &c);
  printf("gpl_prepared_fast_links=%" PRIu64 "\ngpl_prepared_links_only=%" PRIu64
         "\ngpl_prepared_parts_made=%" PRIu64 "\n",
         c.fast_links, c.links_only, c.parts_made);

  for (uint32_t i = 0; i < n; i++) {
    mono_sum += mono_ns[i];
    fast_sum += fast_ns[i];
    prepared_sum += prepared_ns[i];
  }
  printf("gpl_pipelines=%u\ngpl_threads=%u\ngpl_frame_ms=%u\n", n, threads, frame_ms);
  report_times("mono", mono_ns, n);
  report_times("fast", fast_ns, n);
  report_times("prepare", prep_ns, n);
  report_times("prepared", prepared_ns, n);
  printf("gpl_fast_over_mono=%.4f\n", (double)fast_sum / (double)mono_sum);
  /* The target's ratio once the app prepares its pipelines. */
  printf("gpl_prepared_over_mono=%.4f\n", (double)prepared_sum / (double)mono_sum);
  pcache_device_destroy(pc);
  vkDestroyDevice(dc, NULL);
  free(prepared);

  /* 2. Frames until every optimized pipeline is in. */
  while (frames < 100000) {
    uint64_t start = now_ns();
    while (now_ns() - start < (uint64_t)frame_ms * 1000000u) {
      struct timespec ts = {0, 500000};
      nanosleep(&ts, NULL);
    }
    pcache_device_end_frame(pb);
    frames++;
    pcache_device_get_counters(pb, &c);
    if (c.swaps == n)
      break;
  }
  printf("gpl_frames_until_all_swapped=%u\ngpl_all_swapped_ms=%.1f\n", frames,
         (now_ns() - burst0) / 1e6);
  printf("gpl_swaps=%" PRIu64 "\ngpl_swap_frames_mean=%.2f\ngpl_swap_ms_mean=%.2f\n"
         "gpl_swap_ms_max=%.2f\n",
         c.swaps, c.swaps ? (double)c.swap_frames_total / c.swaps : 0,
         c.swaps ? c.swap_ns_total / 1e6 / c.swaps : 0, c.swap_ns_max / 1e6);

  /* 3. The draw cost: the first variant, linked against optimized. */
  {
    variant *var = malloc(sizeof *var);
    VkPipeline optimized;
    variant_make(var, &ob, 0);
    CHECK(pcache_get_graphics_pipeline(pb, &var->info, &optimized));
    draw_bench(&v, db, &ob, linked[0], optimized, draws);
    free(var);
  }
  pcache_device_destroy(pb);
  pcache_device_destroy(pa);
  vkDestroyDevice(db, NULL);
  vkDestroyDevice(da, NULL);
  vkDestroyInstance(v.instance, NULL);
  free(mono_ns);
  free(fast_ns);
  free(prep_ns);
  free(prepared_ns);
  free(mono);
  free(linked);
  return 0;
}
