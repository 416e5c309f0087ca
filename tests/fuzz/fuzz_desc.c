/* Fuzz target for the pipeline description decoder (replay/desc_decode.c)
 * and the daemon's description check: bytes from anywhere must never
 * crash them or make them allocate without bound. What decodes is also
 * described again, and describing is idempotent from there on.
 *
 * Built with libFuzzer when PCACHE_FUZZ is on; otherwise with
 * replay_main.c, which replays the corpus through the same entry point:
 * the fuzz-smoke test. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "replay/desc_decode.h"
#include "fuzz.h"
#include "proto/desc_check.h"

/* Any module hash gets this (valid-looking) code. */
static const uint32_t fake_code[] = {0x07230203, 0x00010000, 0, 1, 0};

static int code(void *ctx, const pcache__hash *hash, const uint32_t **ret_code, size_t *ret_size) {
  (void)ctx;
  (void)hash;
  *ret_code = fake_code;
  *ret_size = sizeof(fake_code);
  return 0;
}

#define MAX_OBJECTS 512

typedef struct table {
  uint64_t handles[MAX_OBJECTS];
  pcache__desc_object *objects[MAX_OBJECTS];
  int n;
} table;

static const pcache__desc_object *find(void *ctx, uint64_t h) {
  table *t = ctx;
  return h && h <= (uint64_t)t->n ? t->objects[h - 1] : NULL;
}
static const pcache__desc_object *lk_module(void *c, VkShaderModule h) {
  return find(c, (uint64_t)h);
}
static const pcache__desc_object *lk_set(void *c, VkDescriptorSetLayout h) {
  return find(c, (uint64_t)h);
}
static const pcache__desc_object *lk_layout(void *c, VkPipelineLayout h) {
  return find(c, (uint64_t)h);
}
static const pcache__desc_object *lk_rp(void *c, VkRenderPass h) { return find(c, (uint64_t)h); }
static const pcache__desc_object *lk_sampler(void *c, VkSampler h) { return find(c, (uint64_t)h); }
static const pcache__desc_object *lk_library(void *c, VkPipeline h) { return find(c, (uint64_t)h); }

/* Handles are 1-based indexes into the table; 0 when the object did not
 * describe (the pipeline is then unhashable). */
static uint64_t add(table *t, int r, pcache__desc_object *o) {
  if (r < 0 || t->n == MAX_OBJECTS) {
    if (r == 0)
      pcache__desc_object_free(o);
    return 0;
  }
  t->objects[t->n++] = o;
  return (uint64_t)t->n;
}

/* Describes a decoded description, its libraries first (each then
 * registered as a library); 0 and the bytes in buf (initialized either
 * way), or an error. */
static int redescribe(pcache__desc_decoded *d, table *t, pcache__desc_buf *buf,
                      pcache__desc_keys *ret_keys) {
  pcache__desc_lookup lk = {t, lk_module, lk_set, lk_layout, lk_rp, lk_sampler, lk_library};
  pcache__desc_object *o = NULL;
  int r;
  pcache__desc_buf_init(buf);
  for (uint32_t i = 0; i < d->n_libraries; i++) {
    pcache__desc_buf lib;
    pcache__desc_keys keys;
    r = redescribe(&d->libraries[i], t, &lib, &keys);
    if (r == 0)
      r = pcache__desc_pipeline_library(&lib, &keys, &o);
    pcache__desc_buf_release(&lib);
    if (r < 0)
      return r;
    d->library_pipelines[i] = (VkPipeline)add(t, r, o);
  }
  for (uint32_t i = 0; i < d->n_samplers; i++) {
    r = pcache__desc_sampler(&d->sampler_infos[i], &o);
    d->samplers[i] = (VkSampler)add(t, r, o);
  }
  for (uint32_t i = 0; i < d->n_set_layouts; i++) {
    r = pcache__desc_set_layout(&d->set_layout_infos[i], &lk, &o);
    d->set_layouts[i] = (VkDescriptorSetLayout)add(t, r, o);
  }
  if (d->has_layout) {
    r = pcache__desc_pipeline_layout(&d->layout_info, &lk, &o);
    d->layout = (VkPipelineLayout)add(t, r, o);
  }
  if (d->has_render_pass) {
    r = pcache__desc_render_pass2(&d->render_pass_info, &o);
    d->render_pass = (VkRenderPass)add(t, r, o);
  }
  for (uint32_t i = 0; i < d->n_modules; i++) {
    r = pcache__desc_shader_module(&d->module_infos[i], &o);
    d->modules[i] = (VkShaderModule)add(t, r, o);
  }
  pcache__desc_decoded_link(d);
  if (d->kind == 2)
    return pcache__desc_compute(&d->compute, &lk, buf, ret_keys);
  return pcache__desc_graphics(&d->graphics, &lk, buf, ret_keys);
}

static void table_free(table *t) {
  for (int i = 0; i < t->n; i++)
    pcache__desc_object_free(t->objects[i]);
  t->n = 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pcache__hash h, modules[PCACHE_DESC_MAX_MODULES];
  pcache__desc_decoded *d = NULL, *d2 = NULL;
  pcache__desc_buf b1, b2;
  pcache__desc_keys k1, k2;
  size_t n_modules;
  table t1 = {0}, t2 = {0};

  pcache__hash128(data, size, &h);
  (void)pcache__desc_check(data, size, &h, 0, modules, &n_modules);
  if (pcache__desc_decode(data, size, code, NULL, &d) < 0)
    return 0;
  if (redescribe(d, &t1, &b1, &k1) == 0) {
    /* The canonical bytes decode, and describe to themselves. */
    if (pcache__desc_decode(b1.data, b1.size, code, NULL, &d2) != 0)
      abort();
    if (redescribe(d2, &t2, &b2, &k2) != 0 || b2.size != b1.size ||
        memcmp(b1.data, b2.data, b1.size) != 0)
      abort();
    pcache__desc_buf_release(&b2);
    pcache__desc_decoded_free(d2);
  }
  pcache__desc_buf_release(&b1);
  table_free(&t1);
  table_free(&t2);
  pcache__desc_decoded_free(d);
  return 0;
}
