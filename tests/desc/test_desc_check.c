/* pcache__desc_check: what the daemon accepts and refuses. */
#include <stdio.h>
#include <string.h>

#include "proto/desc_check.h"
#include "fixtures.h"
#include "test.h"

static int check(const uint8_t *d, size_t n, uint32_t kind) {
  pcache__hash h, modules[PCACHE_DESC_MAX_MODULES];
  size_t n_modules;
  pcache__hash128(d, n, &h);
  return pcache__desc_check(d, n, &h, kind, modules, &n_modules);
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
  pcache__desc_buf_release(&buf);
  fx_world_free(&w);
  printf("ok\n");
  return 0;
}
