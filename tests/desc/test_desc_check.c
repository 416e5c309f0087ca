/* pcache__desc_check: what the daemon accepts and refuses. */
#include <stdio.h>
#include <string.h>

#include "proto/desc_check.h"
#include "proto/pbread.h"
#include "fixtures.h"
#include "test.h"

static int check(const uint8_t *d, size_t n, uint32_t kind) {
  pcache__hash h, modules[PCACHE_DESC_MAX_MODULES];
  size_t n_modules;
  pcache__hash128(d, n, &h);
  return pcache__desc_check(d, n, &h, kind, modules, &n_modules);
}

/* A description: the header (version 1, graphics), then inner (whole
 * fields) wrapped n times as a library (field 19), each level adding a
 * header; written backwards into buf, so deep nesting costs no copies.
 * Returns where it starts; *ret_size its size. */
static const uint8_t *nest(uint8_t *buf, size_t cap, const uint8_t *inner, size_t inner_size,
                           size_t n, size_t *ret_size) {
  static const uint8_t head[] = {0x08, 0x01, 0x10, 0x01};
  uint8_t *p = buf + cap;
  size_t size;
  ASSERT_TRUE(inner_size + sizeof(head) <= cap);
  p -= inner_size;
  memcpy(p, inner, inner_size);
  p -= sizeof(head);
  memcpy(p, head, sizeof(head));
  for (size_t i = 0; i < n; i++) {
    uint8_t len[10];
    size_t l = 0;
    size = (size_t)(buf + cap - p);
    for (size_t v = size; v >= 0x80; v >>= 7)
      len[l++] = (uint8_t)(v | 0x80);
    len[l] = (uint8_t)(size >> (7 * l));
    l++;
    ASSERT_TRUE((size_t)(p - buf) >= l + 2 + sizeof(head));
    p -= l;
    memcpy(p, len, l);
    *--p = 0x01; /* tag 19 << 3 | 2 = 154: 0x9a 0x01 */
    *--p = 0x9a;
    p -= sizeof(head);
    memcpy(p, head, sizeof(head));
  }
  *ret_size = (size_t)(buf + cap - p);
  return p;
}

/* Descriptions that embed libraries: their modules count, their nesting is
 * bounded before protobuf-c sees them. */
static void libraries(fx_world *w) {
  static uint8_t big[1 << 21];
  pcache__hash modules[PCACHE_DESC_MAX_MODULES];
  pcache__desc_decoded *d;
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  const uint8_t *deep;
  size_t n_modules, size;
  fx_pipeline *p = fx_make(w, FX_COUNT - 3, 0); /* gpl_linked */
  uint8_t stage[128];
  size_t stage_size;

  /* A linked pipeline names no stage of its own: its libraries' count. */
  pcache__desc_buf_init(&buf);
  ASSERT_EQ(p->info.stageCount, 0);
  ASSERT_OK(fx_describe(p, w, &buf, &keys));
  ASSERT_OK(pcache__desc_check(buf.data, buf.size, &keys.state_hash, 1, modules, &n_modules));
  ASSERT_EQ(n_modules, 2);
  fx_free(p);

  /* One stage's bytes (field 4 of gpl_pre_raster, its only stage). */
  p = fx_make(w, FX_GPL_FIRST + 1, 0);
  ASSERT_OK(fx_describe(p, w, &buf, &keys));
  fx_free(p);
  {
    const uint8_t *q = buf.data, *at = q, *body = NULL;
    uint64_t tag = 0, len;
    while (tag != (4 << 3 | PCACHE_WIRE_LEN)) {
      at = q;
      ASSERT_OK(pcache__wire_field(&q, buf.data + buf.size, &tag, &len, &body));
    }
    stage_size = (size_t)(q - at);
    ASSERT_LT(stage_size, 128);
    memcpy(stage, at, stage_size);
  }

  /* Two levels of libraries are fine; three are not, nor five at a level. */
  deep = nest(big, sizeof(big), stage, stage_size, 2, &size);
  ASSERT_OK(check(deep, size, 1));
  deep = nest(big, sizeof(big), stage, stage_size, 3, &size);
  ASSERT_ERR(check(deep, size, 1), PCACHE_EBAD_DESC);
  ASSERT_ERR(pcache__desc_decode(deep, size, NULL, NULL, &d), PCACHE_EBAD_DESC);
  {
    uint8_t five[512];
    size_t n = 4;
    static const uint8_t head[] = {0x08, 0x01, 0x10, 0x01};
    memcpy(five, head, 4);
    for (int i = 0; i < PCACHE_DESC_MAX_LIBRARIES + 1; i++) {
      five[n++] = 0x9a;
      five[n++] = 0x01;
      five[n++] = (uint8_t)(4 + stage_size);
      memcpy(five + n, head, 4);
      memcpy(five + n + 4, stage, stage_size);
      n += 4 + stage_size;
    }
    ASSERT_ERR(check(five, n, 1), PCACHE_EBAD_DESC);
    ASSERT_ERR(pcache__desc_check_nesting(five, n), PCACHE_EBAD_DESC);
    /* Four is fine. */
    ASSERT_OK(check(five, n - 7 - stage_size, 1));
  }
  /* Nested a hundred thousand deep: refused at once, no deep recursion
   * (protobuf-c's unpacking would run out of stack). */
  deep = nest(big, sizeof(big), stage, stage_size, 100000, &size);
  ASSERT_ERR(check(deep, size, 0), PCACHE_EBAD_DESC);
  ASSERT_ERR(pcache__desc_decode(deep, size, NULL, NULL, &d), PCACHE_EBAD_DESC);
  /* A compute pipeline links no library; a graphics one with no stage
   * needs parts or libraries. */
  {
    static const uint8_t compute_lib[] = {0x08, 0x01, 0x10, 0x02, 0x90, 0x01, 0x02};
    static const uint8_t parts_only[] = {0x08, 0x01, 0x10, 0x01, 0x90, 0x01, 0x01};
    static const uint8_t nothing[] = {0x08, 0x01, 0x10, 0x01};
    ASSERT_ERR(check(compute_lib, sizeof(compute_lib), 0), PCACHE_EBAD_DESC);
    ASSERT_OK(check(parts_only, sizeof(parts_only), 1));
    ASSERT_ERR(check(nothing, sizeof(nothing), 1), PCACHE_EBAD_DESC);
  }
  pcache__desc_buf_release(&buf);
}

int main(void) {
  fx_world w;
  fx_pipeline *p;
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  pcache__hash modules[PCACHE_DESC_MAX_MODULES], bad_hash;
  size_t n_modules = 99;
  uint8_t copy[4096];

  fx_world_init(&w, 0x3000, 8);
  pcache__desc_buf_init(&buf);

  /* gfx_full names four modules, in stage order. */
  p = fx_make(&w, 6, 0);
  ASSERT_OK(fx_describe(p, &w, &buf, &keys));
  ASSERT_OK(pcache__desc_check(buf.data, buf.size, &keys.state_hash, 1, modules, &n_modules));
  ASSERT_EQ(n_modules, 4);
  {
    VkShaderModule order[] = {w.vs, w.tcs, w.tes, w.fs};
    for (int i = 0; i < 4; i++) {
      const pcache__desc_object *o = w.lookup.shader_module(w.lookup.ctx, order[i]);
      ASSERT_TRUE(pcache__hash_equal(&modules[i], &o->hash));
    }
  }
  /* Any expected kind (0) is fine; the wrong one is not. */
  ASSERT_OK(pcache__desc_check(buf.data, buf.size, &keys.state_hash, 0, modules, &n_modules));
  ASSERT_ERR(pcache__desc_check(buf.data, buf.size, &keys.state_hash, 2, modules, &n_modules),
             PCACHE_EBAD_DESC);

  /* Hash mismatch: one bit off in the hash, or in the bytes. */
  bad_hash = keys.state_hash;
  bad_hash.bytes[7] ^= 1;
  ASSERT_ERR(pcache__desc_check(buf.data, buf.size, &bad_hash, 1, modules, &n_modules),
             PCACHE_EHASH_MISMATCH);
  ASSERT_LT(buf.size, sizeof(copy));
  memcpy(copy, buf.data, buf.size);
  copy[buf.size - 1] ^= 1; /* still parses: a value byte of the last field */
  ASSERT_ERR(pcache__desc_check(copy, buf.size, &keys.state_hash, 1, modules, &n_modules),
             PCACHE_EHASH_MISMATCH);

  /* Wrong format version (field 1 is the first two bytes: 08 01). */
  memcpy(copy, buf.data, buf.size);
  ASSERT_EQ(copy[0], 0x08);
  ASSERT_EQ(copy[1], PCACHE_DESC_FORMAT_VERSION);
  copy[1] = PCACHE_DESC_FORMAT_VERSION + 1;
  ASSERT_ERR(check(copy, buf.size, 1), PCACHE_EBAD_DESC);

  /* Garbage, truncation, empty. */
  {
    static const uint8_t garbage[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x12, 0x34};
    ASSERT_ERR(check(garbage, sizeof(garbage), 0), PCACHE_EBAD_DESC);
    ASSERT_ERR(check(buf.data, buf.size - 3, 0), PCACHE_EBAD_DESC);
    ASSERT_ERR(check(buf.data, 0, 0), PCACHE_EBAD_DESC); /* no version, no kind */
  }
  /* Kind unset: drop field 2 (bytes 2-3: 10 01). */
  memcpy(copy, buf.data, 2);
  memcpy(copy + 2, buf.data + 4, buf.size - 4);
  ASSERT_ERR(check(copy, buf.size - 2, 0), PCACHE_EBAD_DESC);
  fx_free(p);

  /* A module hash of the wrong size. */
  {
    static const uint8_t short_hash[] = {0x08, 0x01, 0x10, 0x02, 0x22, 0x06, 0x1a,
                                         0x04, 0x0a, 0x02, 0xab, 0xcd};
    ASSERT_ERR(check(short_hash, sizeof(short_hash), 0), PCACHE_EBAD_DESC);
  }
  /* Too many stages: nine copies of a stage. */
  {
    uint8_t many[1024];
    size_t n = 0;
    static const uint8_t head[] = {0x08, 0x01, 0x10, 0x01};
    memcpy(many, head, 4);
    n = 4;
    for (int i = 0; i < PCACHE_DESC_MAX_MODULES + 1; i++) {
      many[n++] = 0x22;
      many[n++] = 20;
      many[n++] = 0x1a;
      many[n++] = 18;
      many[n++] = 0x0a;
      many[n++] = 16;
      memset(many + n, i, 16);
      n += 16;
    }
    ASSERT_ERR(check(many, n, 1), PCACHE_EBAD_DESC);
    /* Eight is fine. */
    ASSERT_OK(check(many, n - 22, 1));
  }
  p = fx_make(&w, 10, 0);
  ASSERT_OK(fx_describe(p, &w, &buf, &keys));
  ASSERT_OK(pcache__desc_check(buf.data, buf.size, &keys.state_hash, 2, modules, &n_modules));
  ASSERT_EQ(n_modules, 1);
  fx_free(p);
  libraries(&w);
  pcache__desc_buf_release(&buf);
  fx_world_free(&w);
  printf("ok\n");
  return 0;
}
