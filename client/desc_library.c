/* The describer's graphics pipeline libraries (VK_EXT_graphics_pipeline_
 * library): which parts a create info carries itself, and the libraries it
 * links. A library is described like any pipeline, of the parts it has
 * (desc_graphics.c); once built it is recorded with its description as its
 * object (desc_objects.c), which a pipeline linking it embeds whole, so a
 * description stays enough to rebuild the pipeline. desc_graphics.c also
 * needs a few facts from those embedded descriptions, read back here: the
 * libraries' stages (a mesh stage leaves vertex input unused) and whether
 * their pre-rasterization part discards (which leaves the fragment parts
 * unused). */
#include "desc_internal.h"

#include <string.h>

/* Parts as the spec defines them: the struct's flags; without it, none for
 * a library or a linked pipeline, all four for any other pipeline. */
static uint32_t parts_of(const VkGraphicsPipelineCreateInfo *info,
                         const VkGraphicsPipelineLibraryCreateInfoEXT *parts,
                         const VkPipelineLibraryCreateInfoKHR *libraries) {
  if (parts)
    return parts->flags;
  if ((info->flags & VK_PIPELINE_CREATE_LIBRARY_BIT_KHR) ||
      (libraries && libraries->libraryCount > 0))
    return 0;
  return PCACHE_DESC_ALL_PARTS;
}

static void find_structs(const VkGraphicsPipelineCreateInfo *info,
                         const VkGraphicsPipelineLibraryCreateInfoEXT **ret_parts,
                         const VkPipelineLibraryCreateInfoKHR **ret_libraries) {
  *ret_parts = NULL;
  *ret_libraries = NULL;
  for (const VkBaseInStructure *s = info->pNext; s; s = s->pNext) {
    if (s->sType == VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT)
      *ret_parts = (const void *)s;
    else if (s->sType == VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR)
      *ret_libraries = (const void *)s;
  }
}

uint32_t pcache__desc_graphics_parts(const VkGraphicsPipelineCreateInfo *info) {
  const VkGraphicsPipelineLibraryCreateInfoEXT *parts;
  const VkPipelineLibraryCreateInfoKHR *libraries;
  find_structs(info, &parts, &libraries);
  return parts_of(info, parts, libraries);
}

/* The facts of one embedded library (level depth) and of those it links.
 * Its bytes are this describer's own, so they parse. */
static int scan_library(pcache__desc_writer *w, reader r, int depth, pcache__desc_gpl *g) {
  uint32_t f, sf, n_libraries = 0;
  uint64_t v, sv;
  reader body = {0}, sub = {0};
  int rc;
  while (r.p < r.end) {
    if (rd_field(&r, &f, &v, &body))
      return desc_unhashable(w, "bad_library", 0);
    switch (f) {
    case 4: /* a stage: ShaderStageDesc.stage */
      g->n_stages++;
      while (body.p < body.end && !rd_field(&body, &sf, &sv, &sub))
        if (sf == 1)
          g->stage_mask |= (uint32_t)sv;
      break;
    case 13: /* RasterizationDesc.rasterizer_discard_enable, written only when static */
      while (body.p < body.end && !rd_field(&body, &sf, &sv, &sub))
        if (sf == 2 && sv)
          g->discard = 1;
      break;
    case 19: /* a library it was linked from */
      if (depth == PCACHE_DESC_MAX_LIBRARY_DEPTH)
        return desc_unhashable(w, "library_depth", 0);
      if (++n_libraries > PCACHE_DESC_MAX_LIBRARIES)
        return desc_unhashable(w, "too_many_libraries", 0);
      if ((rc = scan_library(w, body, depth + 1, g)) < 0)
        return rc;
      break;
    }
  }
  return 0;
}

int pcache__desc_gpl_scan(pcache__desc_writer *w, const VkGraphicsPipelineCreateInfo *info,
                          const pcache__desc_lookup *lookup, pcache__desc_gpl *ret_gpl) {
  const VkGraphicsPipelineLibraryCreateInfoEXT *parts;
  const VkPipelineLibraryCreateInfoKHR *libraries;
  pcache__desc_gpl *g = ret_gpl;
  uint32_t n;
  int r;
  memset(g, 0, sizeof(*g));
  find_structs(info, &parts, &libraries);
  g->parts = parts_of(info, parts, libraries);
  n = libraries ? libraries->libraryCount : 0;
  /* A complete pipeline is described as if the extension did not exist. */
  g->gpl = g->parts != PCACHE_DESC_ALL_PARTS ||
           (info->flags & VK_PIPELINE_CREATE_LIBRARY_BIT_KHR) || n > 0;
  if (!g->gpl)
    return 0;
  if (g->parts & ~(uint32_t)PCACHE_DESC_ALL_PARTS)
    return desc_unhashable(w, "library_parts", 0);
  if (g->parts == 0 && n == 0)
    return desc_unhashable(w, "empty_library", 0);
  if (n > PCACHE_DESC_MAX_LIBRARIES)
    return desc_unhashable(w, "too_many_libraries", 0);
  for (uint32_t i = 0; i < n; i++) {
    const pcache__desc_object *lib =
        lookup->pipeline_library ? lookup->pipeline_library(lookup->ctx, libraries->pLibraries[i])
                                 : NULL;
    if (!lib)
      return desc_unrecorded(w, "unrecorded_pipeline_library", VK_OBJECT_TYPE_PIPELINE,
                             (uint64_t)libraries->pLibraries[i]);
    g->libraries[g->n_libraries++] = lib;
    r = scan_library(w, (reader){lib->encoded, lib->encoded + lib->encoded_size}, 1, g);
    if (r < 0)
      return r;
  }
  return 0;
}

void pcache__desc_put_gpl(pcache__desc_writer *w, const pcache__desc_gpl *g) {
  if (!g->gpl)
    return;
  put_u32(w, 18, g->parts);
  for (uint32_t i = 0; i < g->n_libraries; i++)
    put_object(w, 19, g->libraries[i]);
}
