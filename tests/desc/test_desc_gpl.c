/* Graphics pipeline libraries (the fixtures from FX_GPL_FIRST on): a
 * library reads nothing of the parts it does not carry (poison pointers
 * and unknown handles there change no byte and crash nothing, under ASan
 * too); what it carries is hashed; a linked pipeline's hash follows its
 * libraries' descriptions, not their handles; a complete pipeline is
 * described as if the extension did not exist; and what the describer
 * cannot describe is refused with its reason. */
#include <stdio.h>
#include <string.h>

#include "fields.h"
#include "fixtures.h"
#include "test.h"

#define VI VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT
#define PRE VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT
#define FS VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT
#define FO VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT

/* The fixture numbers (fixtures_gpl.c). */
enum {
  VERTEX_INPUT = FX_GPL_FIRST,
  PRE_RASTER,
  FRAGMENT,
  OUTPUT,
  SHADERS,
  FRAGMENT_RENDERING,
  NESTED,
  LINKED,
  LINKED_LTO,
  LINKED_NESTED,
};

/* Non-canonical on x86-64 (and unmapped elsewhere): any read of it
 * faults. */
#define POISON ((void *)(uintptr_t)0xdead00000000beefull)
#define UNKNOWN 0x4242

/* The state of every part p does not carry, made garbage. */
static void poison_foreign(fx_pipeline *p) {
  VkGraphicsPipelineCreateInfo *g = &p->info;
  uint32_t parts = pcache__desc_graphics_parts(g);
  if (!(parts & VI)) {
    g->pVertexInputState = POISON;
    g->pInputAssemblyState = POISON;
  }
  if (!(parts & PRE)) {
    g->pTessellationState = POISON;
    g->pViewportState = POISON;
    g->pRasterizationState = POISON;
  }
  if (!(parts & FS))
    g->pDepthStencilState = POISON;
  if (!(parts & FO)) {
    g->pColorBlendState = POISON;
    /* The formats of a rendering info are the output part's. */
    p->rendering.pColorAttachmentFormats = POISON;
    p->rendering.colorAttachmentCount = 3;
  }
  if (!(parts & (FS | FO)))
    g->pMultisampleState = POISON;
  if (!(parts & (PRE | FS))) {
    g->pStages = POISON;
    g->stageCount = 5;
    /* A linked pipeline's own layout stands for its libraries'. */
    if (g->flags & VK_PIPELINE_CREATE_LIBRARY_BIT_KHR)
      g->layout = (VkPipelineLayout)UNKNOWN;
  }
  if (!(parts & (PRE | FS | FO))) {
    g->renderPass = (VkRenderPass)UNKNOWN;
    g->subpass = 7;
  }
}

static void poison_is_ignored(const fx_world *w) {
  for (int i = FX_GPL_FIRST; i < FX_COUNT; i++) {
    fx_pipeline *p = fx_make(w, i, 0);
    pcache__desc_buf b0, b1;
    pcache__desc_keys k0, k1;
    pcache__desc_buf_init(&b0);
    pcache__desc_buf_init(&b1);
    ASSERT_OK(fx_describe(p, w, &b0, &k0));
    poison_foreign(p);
    if (fx_describe(p, w, &b1, &k1) != 0)
      TEST_FAIL_("%s: poisoned state of other parts was read (%s)", fx_names[i],
                 b1.unhashable_reason ? b1.unhashable_reason : "?");
    if (b0.size != b1.size || memcmp(b0.data, b1.data, b0.size) != 0)
      TEST_FAIL_("%s: state of other parts changed the description", fx_names[i]);
    ASSERT_EQ(k0.tier1_key, k1.tier1_key);
    pcache__desc_buf_release(&b0);
    pcache__desc_buf_release(&b1);
    fx_free(p);
  }
}

/* What each library carries is state. */
static const field vertex_input_hashed[] = {
    F(va[0].format, U32),
    F(vb[0].stride, U32),
    F(ia.topology, U32),
    FB(parts.flags, FO),
};
static const field pre_raster_hashed[] = {
    F(rs.cullMode, U32),        F(rs.polygonMode, U32),
    F(viewports[0].width, F32), F(vp.viewportCount, DEC),
    F(stages[0].flags, U32),    FB(info.flags, VK_PIPELINE_CREATE_DISABLE_OPTIMIZATION_BIT),
};
static const field fragment_hashed[] = {
    F(spec_data[0], U32),
    F(ms.alphaToCoverageEnable, B32),
    F(ms.rasterizationSamples, U32),
};
static const field output_hashed[] = {
    F(cba[0].colorWriteMask, U32),
    F(cb.logicOpEnable, B32),
    F(ms.sampleShadingEnable, B32),
};
static const field rendering_hashed[] = {
    F(ds.depthCompareOp, U32),
    F(ds.depthWriteEnable, B32),
    F(rendering.viewMask, U32),
};
/* A fragment shader library's rendering formats are the output part's. */
static const field rendering_ignored[] = {
    F(rendering.depthAttachmentFormat, U32),
    F(rendering.stencilAttachmentFormat, U32),
    F(color_formats[0], U32),
};
static const field linked_hashed[] = {
    FB(info.flags, VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT),
    FB(info.flags, VK_PIPELINE_CREATE_DISABLE_OPTIMIZATION_BIT),
};

/* Library fixture lib again under a new handle, changed by change (may be
 * NULL). */
static VkPipeline add_library(fx_world *w, int lib, void (*change)(fx_pipeline *)) {
  fx_pipeline *p = fx_make(w, lib, 0);
  VkPipeline h;
  if (change)
    change(p);
  h = fx_world_add_library(w, p);
  fx_free(p);
  return h;
}

/* p links library too. */
static void link_one(fx_pipeline *p, VkPipeline library) {
  p->libraries[0] = library;
  p->link =
      (VkPipelineLibraryCreateInfoKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR,
                                       .pNext = p->info.pNext,
                                       .libraryCount = 1,
                                       .pLibraries = p->libraries};
  p->info.pNext = &p->link;
}

static void other_constant(fx_pipeline *p) { p->spec_data[0] ^= 1; }

/* A linked pipeline's hash is that of its libraries' descriptions, in the
 * app's order. */
static void linked_follows_libraries(fx_world *w) {
  fx_pipeline *p = fx_make(w, LINKED, 0);
  pcache__hash h0 = fx_hash_of(p, w), h;
  VkPipeline fs = p->libraries[2];
  p->libraries[2] = add_library(w, FRAGMENT, NULL); /* same library, other handle */
  h = fx_hash_of(p, w);
  ASSERT_TRUE(pcache__hash_equal(&h, &h0));
  p->libraries[2] = add_library(w, FRAGMENT, other_constant);
  h = fx_hash_of(p, w);
  ASSERT_TRUE(!pcache__hash_equal(&h, &h0));
  p->libraries[2] = fs;
  p->libraries[0] = p->libraries[1];
  p->libraries[1] = w->libraries[VERTEX_INPUT - FX_GPL_FIRST];
  h = fx_hash_of(p, w);
  ASSERT_TRUE(!pcache__hash_equal(&h, &h0));
  fx_free(p);
}

/* The extension's structs saying "complete": the same hash as without. */
static void complete_as_before(const fx_world *w) {
  fx_pipeline *p = fx_make(w, 0, 0);
  pcache__hash h0 = fx_hash_of(p, w), h;
  p->parts = (VkGraphicsPipelineLibraryCreateInfoEXT){
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT,
      .flags = VI | PRE | FS | FO};
  p->link = (VkPipelineLibraryCreateInfoKHR){
      .sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR, .pNext = &p->parts};
  p->info.pNext = &p->link;
  h = fx_hash_of(p, w);
  ASSERT_TRUE(pcache__hash_equal(&h, &h0));
  ASSERT_EQ(pcache__desc_graphics_parts(&p->info), (uint32_t)PCACHE_DESC_ALL_PARTS);
  fx_free(p);
}

static void refused(const fx_pipeline *p, const fx_world *w, const char *why) {
  pcache__desc_buf b;
  pcache__desc_keys k;
  pcache__desc_buf_init(&b);
  ASSERT_ERR(fx_describe(p, w, &b, &k), PCACHE_EUNHASHABLE);
  if (!b.unhashable_reason || strcmp(b.unhashable_reason, why) != 0)
    TEST_FAIL_("refused for %s, not %s", b.unhashable_reason ? b.unhashable_reason : "nothing",
               why);
  pcache__desc_buf_release(&b);
}

static void unhashable(fx_world *w) {
  fx_pipeline *p = fx_make(w, LINKED, 0);
  VkPipelineShaderStageCreateInfo eight[8];
  VkPipeline five[5], lib;

  p->libraries[1] = (VkPipeline)UNKNOWN;
  refused(p, w, "unrecorded_pipeline_library");
  for (int i = 0; i < 5; i++)
    five[i] = w->libraries[i];
  p->link.libraryCount = 5;
  p->link.pLibraries = five;
  refused(p, w, "too_many_libraries");
  fx_free(p);

  /* Depth: a library linking the nested library (itself linked from two)
   * is fine; a pipeline linking that one would embed three levels. */
  p = fx_make(w, OUTPUT, 0);
  link_one(p, w->libraries[NESTED - FX_GPL_FIRST]);
  lib = fx_world_add_library(w, p);
  fx_free(p);
  p = fx_make(w, LINKED_NESTED, 0);
  p->libraries[0] = lib;
  p->link.libraryCount = 1;
  refused(p, w, "library_depth");
  fx_free(p);

  /* A library with no part, or with a part no one knows. */
  p = fx_make(w, VERTEX_INPUT, 0);
  p->parts.flags = 0;
  refused(p, w, "empty_library");
  p->parts.flags = VI | 0x10;
  refused(p, w, "library_parts");
  fx_free(p);

  /* More stages than a description may name, the libraries' counted: a
   * pre-rasterization library of eight (fine on its own) linked into a
   * fragment shader library of one. */
  p = fx_make(w, PRE_RASTER, 0);
  for (int i = 0; i < 8; i++)
    eight[i] = p->stages[0];
  p->info.pStages = eight;
  p->info.stageCount = 8;
  lib = fx_world_add_library(w, p);
  fx_free(p);
  p = fx_make(w, FRAGMENT, 0);
  link_one(p, lib);
  refused(p, w, "too_many_stages");
  fx_free(p);
  /* Or into a pipeline with no stage of its own. */
  p = fx_make(w, LINKED, 0);
  p->libraries[1] = lib;
  refused(p, w, "too_many_stages");
  fx_free(p);
}

int main(void) {
  fx_world w;
  int n_hashed = 0, n_ignored = 0;
  fx_world_init(&w, 0x6000, 8);
  poison_is_ignored(&w);
  n_hashed += fx_run(&w, VERTEX_INPUT, vertex_input_hashed, N(vertex_input_hashed), 1);
  n_hashed += fx_run(&w, PRE_RASTER, pre_raster_hashed, N(pre_raster_hashed), 1);
  n_hashed += fx_run(&w, FRAGMENT, fragment_hashed, N(fragment_hashed), 1);
  n_hashed += fx_run(&w, OUTPUT, output_hashed, N(output_hashed), 1);
  n_hashed += fx_run(&w, FRAGMENT_RENDERING, rendering_hashed, N(rendering_hashed), 1);
  n_ignored += fx_run(&w, FRAGMENT_RENDERING, rendering_ignored, N(rendering_ignored), 0);
  n_hashed += fx_run(&w, LINKED, linked_hashed, N(linked_hashed), 1);
  n_hashed += fx_run(&w, LINKED_LTO, linked_hashed + 1, 1, 1);
  linked_follows_libraries(&w);
  complete_as_before(&w);
  unhashable(&w);
  printf("poison ignored in %d fixtures; hashed fields: %d, ignored fields: %d\n",
         FX_COUNT - FX_GPL_FIRST, n_hashed, n_ignored);
  fx_world_free(&w);
  return 0;
}
