/* The graphics pipeline library fixtures (VK_EXT_graphics_pipeline_library):
 * a library of each part, one of two parts, a fragment shader library with
 * dynamic rendering, a library linked from two of those with a part of its
 * own, and pipelines linked from the world's libraries, with and
 * without link-time optimization, and from the nested one. Each starts from fixtures.c's base,
 * a complete pipeline: a library keeps the state of the other parts as it
 * is (valid, and to be ignored), which test_desc_gpl replaces with poison. */
#include "fixtures.h"

#include "test.h"

enum {
  GPL_VERTEX_INPUT = FX_GPL_FIRST,
  GPL_PRE_RASTER,
  GPL_FRAGMENT,
  GPL_OUTPUT,
  GPL_SHADERS,
  GPL_FRAGMENT_RENDERING,
  GPL_NESTED, /* a library linked from libraries, with a part of its own */
  GPL_LINKED,
  GPL_LINKED_LTO,
  GPL_LINKED_NESTED,
};
_Static_assert(GPL_LINKED - FX_GPL_FIRST == FX_GPL_LIBRARIES, "libraries come first");
_Static_assert(GPL_LINKED_NESTED + 1 == FX_COUNT, "the linked ones last");

#define VI VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT
#define PRE VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT
#define FS VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT
#define FO VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT

/* Every library may be linked with link-time optimization. */
static void library(fx_pipeline *p, VkGraphicsPipelineLibraryFlagsEXT parts) {
  p->parts = (VkGraphicsPipelineLibraryCreateInfoEXT){
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT,
      .pNext = (void *)p->info.pNext,
      .flags = parts};
  p->info.pNext = &p->parts;
  p->info.flags |= VK_PIPELINE_CREATE_LIBRARY_BIT_KHR |
                   VK_PIPELINE_CREATE_RETAIN_LINK_TIME_OPTIMIZATION_INFO_BIT_EXT;
  if (!(parts & (PRE | FS)))
    p->info.stageCount = 0;
}

/* Links the world's libraries (by fixture number). */
static void link(fx_pipeline *p, const fx_world *w, const int *libraries, uint32_t n) {
  for (uint32_t i = 0; i < n; i++)
    p->libraries[i] = w->libraries[libraries[i] - FX_GPL_FIRST];
  p->link =
      (VkPipelineLibraryCreateInfoKHR){.sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR,
                                       .pNext = p->info.pNext,
                                       .libraryCount = n,
                                       .pLibraries = p->libraries};
  p->info.pNext = &p->link;
}

/* A pipeline linked from libraries: no state of its own but the layout,
 * which stands for the union of theirs. */
static void linked(fx_pipeline *p, const fx_world *w, const int *libraries, uint32_t n) {
  p->info = (VkGraphicsPipelineCreateInfo){.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                           .layout = w->layout,
                                           .basePipelineIndex = -1};
  link(p, w, libraries, n);
}

void fx_fill_gpl(fx_pipeline *p, const fx_world *w, int i) {
  static const int four[] = {GPL_VERTEX_INPUT, GPL_PRE_RASTER, GPL_FRAGMENT, GPL_OUTPUT};
  static const int three[] = {GPL_VERTEX_INPUT, GPL_SHADERS, GPL_OUTPUT};
  static const int front[] = {GPL_VERTEX_INPUT, GPL_PRE_RASTER};
  static const int nested[] = {GPL_NESTED, GPL_OUTPUT};
  switch (i) {
  case GPL_VERTEX_INPUT:
    library(p, VI);
    break;
  case GPL_PRE_RASTER:
    library(p, PRE);
    p->info.stageCount = 1; /* the vertex shader */
    break;
  case GPL_FRAGMENT:
    library(p, FS);
    p->stages[0] = p->stages[1];
    p->info.stageCount = 1;
    break;
  case GPL_OUTPUT:
    library(p, FO);
    break;
  case GPL_SHADERS:
    library(p, PRE | FS);
    break;
  case GPL_FRAGMENT_RENDERING:
    /* The formats belong to the output part: the depth/stencil state is
     * described whatever they say. */
    library(p, FS);
    p->stages[0] = p->stages[1];
    p->info.stageCount = 1;
    p->info.renderPass = VK_NULL_HANDLE;
    p->rendering.pNext = p->info.pNext;
    p->info.pNext = &p->rendering;
    p->ds.depthTestEnable = VK_TRUE;
    p->ds.depthWriteEnable = VK_TRUE;
    break;
  case GPL_NESTED:
    /* Not all four parts: that would be a complete pipeline, which no
     * library may be. */
    library(p, FS);
    p->stages[0] = p->stages[1];
    p->info.stageCount = 1;
    link(p, w, front, 2);
    break;
  case GPL_LINKED:
    linked(p, w, four, 4);
    break;
  case GPL_LINKED_LTO:
    linked(p, w, three, 3);
    p->info.flags = VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT;
    break;
  case GPL_LINKED_NESTED:
    linked(p, w, nested, 2);
    break;
  default:
    TEST_FAIL_("no fixture %d", i);
  }
}

VkPipeline fx_world_add_library(fx_world *w, const fx_pipeline *p) {
  pcache__desc_object *o;
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  pcache__desc_buf_init(&buf);
  ASSERT_OK(fx_describe(p, w, &buf, &keys));
  ASSERT_OK(pcache__desc_pipeline_library(&buf, &keys, &o));
  pcache__desc_buf_release(&buf);
  return (VkPipeline)fx_world_add(w, FX_LIBRARY, o);
}

void fx_world_add_libraries(fx_world *w) {
  for (int i = 0; i < FX_GPL_LIBRARIES; i++) {
    fx_pipeline *p = fx_make(w, FX_GPL_FIRST + i, 0);
    w->libraries[i] = fx_world_add_library(w, p);
    fx_free(p);
  }
}

int fx_module_count(const fx_world *w, int i) {
  fx_pipeline *p = fx_make(w, i, 0);
  int n = p->compute                                           ? 1
          : pcache__desc_graphics_parts(&p->info) & (PRE | FS) ? (int)p->info.stageCount
                                                               : 0;
  for (uint32_t j = 0; j < p->link.libraryCount; j++)
    for (int k = 0; k < FX_GPL_LIBRARIES; k++)
      if (w->libraries[k] == p->libraries[j])
        n += fx_module_count(w, FX_GPL_FIRST + k);
  fx_free(p);
  return n;
}
