/* describe -> decode -> describe gives the same bytes for every fixture,
 * and the hand-written encoder agrees with protobuf-c's packer. */
#include <stdio.h>
#include <stdlib.h>

#include "common/alloc.h"
#include "proto/desc_check.h"
#include "fixtures.h"
#include "proto/pcache.pb-c.h"
#include "test.h"

/* protobuf-c's own pack of our bytes must be our bytes. */
static void check_canonical(const uint8_t *data, size_t size) {
  Pcachepb__PipelineDesc *m = pcachepb__pipeline_desc__unpack(&pcache__pb_allocator, size, data);
  uint8_t *out;
  ASSERT_TRUE(m);
  ASSERT_EQ(pcachepb__pipeline_desc__get_packed_size(m), size);
  out = malloc(size + 1);
  ASSERT_EQ(pcachepb__pipeline_desc__pack(m, out), size);
  ASSERT_MEMEQ(out, data, size);
  free(out);
  pcachepb__pipeline_desc__free_unpacked(m, &pcache__pb_allocator);
}

/* The decoded objects described into a second world, by new handles; the
 * libraries first, each described again and registered as a library. */
static void register_decoded(fx_world *w2, pcache__desc_decoded *d) {
  pcache__desc_object *o;
  for (uint32_t i = 0; i < d->n_libraries; i++) {
    pcache__desc_buf b;
    pcache__desc_keys k;
    register_decoded(w2, &d->libraries[i]);
    pcache__desc_buf_init(&b);
    ASSERT_OK(pcache__desc_graphics(&d->libraries[i].graphics, &w2->lookup, &b, &k));
    ASSERT_OK(pcache__desc_pipeline_library(&b, &k, &o));
    d->library_pipelines[i] = (VkPipeline)fx_world_add(w2, FX_LIBRARY, o);
    pcache__desc_buf_release(&b);
  }
  for (uint32_t i = 0; i < d->n_samplers; i++) {
    ASSERT_OK(pcache__desc_sampler(&d->sampler_infos[i], &o));
    d->samplers[i] = (VkSampler)fx_world_add(w2, FX_SAMPLER, o);
  }
  for (uint32_t i = 0; i < d->n_set_layouts; i++) {
    ASSERT_OK(pcache__desc_set_layout(&d->set_layout_infos[i], &w2->lookup, &o));
    d->set_layouts[i] = (VkDescriptorSetLayout)fx_world_add(w2, FX_SET_LAYOUT, o);
  }
  if (d->has_layout) {
    ASSERT_OK(pcache__desc_pipeline_layout(&d->layout_info, &w2->lookup, &o));
    d->layout = (VkPipelineLayout)fx_world_add(w2, FX_PIPELINE_LAYOUT, o);
  }
  if (d->has_render_pass) {
    ASSERT_OK(pcache__desc_render_pass2(&d->render_pass_info, &o));
    d->render_pass = (VkRenderPass)fx_world_add(w2, FX_RENDER_PASS, o);
  }
  for (uint32_t i = 0; i < d->n_modules; i++) {
    ASSERT_TRUE(d->module_infos[i].codeSize > 0);
    ASSERT_OK(pcache__desc_shader_module(&d->module_infos[i], &o));
    ASSERT_TRUE(pcache__hash_equal(&o->hash, &d->module_hashes[i]));
    d->modules[i] = (VkShaderModule)fx_world_add(w2, FX_MODULE, o);
  }
  pcache__desc_decoded_link(d);
}

/* Big sub-messages: lengths of two and three varint bytes, and the output
 * buffer outgrowing its inline storage. */
static void big(fx_world *w) {
  static const uint32_t counts[] = {20, 200, 3000};
  for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
    fx_pipeline *p = fx_make(w, 0, 0);
    VkVertexInputAttributeDescription *va = calloc(counts[c], sizeof(*va));
    pcache__desc_buf b1, b2;
    pcache__desc_keys k1, k2;
    pcache__desc_decoded *d;
    fx_world w2;
    ASSERT_TRUE(va);
    for (uint32_t i = 0; i < counts[c]; i++)
      va[i] = (VkVertexInputAttributeDescription){i, 0, VK_FORMAT_R32G32B32A32_SFLOAT, i * 16};
    p->vi.vertexAttributeDescriptionCount = counts[c];
    p->vi.pVertexAttributeDescriptions = va;
    pcache__desc_buf_init(&b1);
    pcache__desc_buf_init(&b2);
    ASSERT_OK(fx_describe(p, w, &b1, &k1));
    ASSERT_EQ(b1.heap, b1.size > sizeof(b1.inline_storage));
    check_canonical(b1.data, b1.size);
    ASSERT_OK(pcache__desc_decode(b1.data, b1.size, fx_code, NULL, &d));
    fx_world_init(&w2, 0x55000, 8);
    register_decoded(&w2, d);
    ASSERT_OK(pcache__desc_graphics(&d->graphics, &w2.lookup, &b2, &k2));
    ASSERT_EQ(b1.size, b2.size);
    ASSERT_MEMEQ(b1.data, b2.data, b1.size);
    printf("%u attributes: %zu bytes ok\n", counts[c], b1.size);
    fx_world_free(&w2);
    pcache__desc_decoded_free(d);
    pcache__desc_buf_release(&b1);
    pcache__desc_buf_release(&b2);
    free(va);
    fx_free(p);
  }
}

/* A legal create info whose description would be huge: 200
 * specialization entries, each naming all 1 MiB of the data (the same
 * bytes, copied into the description once an entry). The describer stops
 * at PCACHE_DESC_MAX_BYTES and calls it unhashable ("too_large"), so the
 * pipeline goes to the driver as without pcache; before, it built a
 * 200 MiB description (the hostile test's L1: 2 GiB at 2048 entries). */
static void too_large(fx_world *w) {
  enum { ENTRIES = 200, DATA = 1 << 20 };
  fx_pipeline *p = fx_make(w, 0, 0);
  VkSpecializationMapEntry *entries = calloc(ENTRIES, sizeof *entries);
  uint8_t *data = calloc(1, DATA);
  VkSpecializationInfo spec = {.mapEntryCount = ENTRIES, .pMapEntries = entries,
                               .dataSize = DATA, .pData = data};
  pcache__desc_buf b;
  pcache__desc_keys k;
  ASSERT_TRUE(entries && data);
  for (uint32_t i = 0; i < ENTRIES; i++)
    entries[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 0, .size = DATA};
  if (p->compute)
    p->cinfo.stage.pSpecializationInfo = &spec;
  else
    p->stages[0].pSpecializationInfo = &spec;
  pcache__desc_buf_init(&b);
  ASSERT_EQ(fx_describe(p, w, &b, &k), PCACHE_EUNHASHABLE);
  ASSERT_STREQ(b.unhashable_reason, "too_large");
  ASSERT_LE(b.capacity, 2 * PCACHE_DESC_MAX_BYTES);
  printf("%u entries of %u bytes: unhashable (too_large), %zu bytes held at most\n", ENTRIES,
         DATA, b.capacity);
  pcache__desc_buf_release(&b);
  free(entries);
  free(data);
  fx_free(p);
}

int main(void) {
  fx_world w;
  pcache__hash hashes[FX_COUNT];
  uint64_t tier1[FX_COUNT];
  fx_world_init(&w, 0x1000, 8);
  for (int i = 0; i < FX_COUNT; i++) {
    fx_pipeline *p = fx_make(&w, i, 0);
    pcache__desc_buf b1, b2;
    pcache__desc_keys k1, k2;
    pcache__desc_decoded *d;
    pcache__hash modules[PCACHE_DESC_MAX_MODULES];
    size_t n_modules = 0;
    fx_world w2;

    pcache__desc_buf_init(&b1);
    pcache__desc_buf_init(&b2);
    ASSERT_OK(fx_describe(p, &w, &b1, &k1));
    check_canonical(b1.data, b1.size);
    hashes[i] = k1.state_hash;
    tier1[i] = k1.tier1_key;

    ASSERT_OK(pcache__desc_check(b1.data, b1.size, &k1.state_hash, p->compute ? 2 : 1, modules,
                                 &n_modules));
    ASSERT_EQ(n_modules, fx_module_count(&w, i));

    ASSERT_OK(pcache__desc_decode(b1.data, b1.size, fx_code, NULL, &d));
    ASSERT_EQ(d->kind, p->compute ? 2u : 1u);
    fx_world_init(&w2, 0x777000, 24);
    register_decoded(&w2, d);
    if (d->kind == 2)
      ASSERT_OK(pcache__desc_compute(&d->compute, &w2.lookup, &b2, &k2));
    else
      ASSERT_OK(pcache__desc_graphics(&d->graphics, &w2.lookup, &b2, &k2));
    if (b1.size != b2.size || memcmp(b1.data, b2.data, b1.size) != 0)
      TEST_FAIL_("%s: round trip changed the description (%zu -> %zu bytes)", fx_names[i],
                 b1.size, b2.size);
    ASSERT_TRUE(pcache__hash_equal(&k1.state_hash, &k2.state_hash));
    ASSERT_EQ(k1.tier1_key, k2.tier1_key);
    printf("%-22s %4zu bytes ok\n", fx_names[i], b1.size);

    fx_world_free(&w2);
    pcache__desc_decoded_free(d);
    pcache__desc_buf_release(&b1);
    pcache__desc_buf_release(&b2);
    fx_free(p);
  }
  /* Render pass 1 and 2 forms of one render pass describe alike. */
  ASSERT_TRUE(pcache__hash_equal(&hashes[0], &hashes[9]));
  ASSERT_EQ(tier1[0], tier1[9]);
  /* Same attachments, other per-draw state: same tier-1 key. */
  ASSERT_EQ(tier1[0], tier1[3]);
  ASSERT_EQ(tier1[0], tier1[4]);
  ASSERT_NE(tier1[0], tier1[1]);
  ASSERT_NE(tier1[2], tier1[5]); /* samples differ */
  for (int i = 0; i < FX_COUNT; i++)
    for (int j = i + 1; j < FX_COUNT; j++)
      if (!(i == 0 && j == 9))
        ASSERT_TRUE(!pcache__hash_equal(&hashes[i], &hashes[j]));
  big(&w);
  too_large(&w);
  fx_world_free(&w);
  return 0;
}
