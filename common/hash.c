#include "hash.h"

#include <errno.h>
#include <stdatomic.h>

#include "hash_simd.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

void pcache__hash128(const void *data, size_t size, pcache__hash *ret_hash) {
  XXH128_hash_t h = XXH3_128bits(data, size);
  XXH128_canonical_t canon;
  XXH128_canonicalFromHash(&canon, h);
  memcpy(ret_hash->bytes, canon.digest, PCACHE_HASH_SIZE);
}

typedef uint64_t (*checksum_fn)(const void *data, size_t size);

static uint64_t checksum64_base(const void *data, size_t size) { return XXH3_64bits(data, size); }

/* The build of XXH3-64 this CPU runs best: picked once, on first use. */
static checksum_fn checksum_pick(void) {
#ifdef PCACHE_HAVE_CHECKSUM_AVX2
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2"))
    return pcache__checksum64_avx2;
#endif
  return checksum64_base;
}

static _Atomic(checksum_fn) chosen;

static checksum_fn checksum_get(void) {
  checksum_fn f = atomic_load_explicit(&chosen, memory_order_relaxed);
  if (!f) {
    f = checksum_pick();
    atomic_store_explicit(&chosen, f, memory_order_relaxed);
  }
  return f;
}

uint64_t pcache__checksum64(const void *data, size_t size) { return checksum_get()(data, size); }

const char *pcache__checksum64_build(void) {
#ifdef PCACHE_HAVE_CHECKSUM_AVX2
  if (checksum_get() == pcache__checksum64_avx2)
    return "avx2";
#endif
  return "baseline";
}

uint64_t pcache__checksum64_portable(const void *data, size_t size) {
  return checksum64_base(data, size);
}

void pcache__hex(const void *data, size_t size, char *out) {
  static const char digits[] = "0123456789abcdef";
  const uint8_t *p = data;
  for (size_t i = 0; i < size; i++) {
    out[2 * i] = digits[p[i] >> 4];
    out[2 * i + 1] = digits[p[i] & 15];
  }
  out[2 * size] = '\0';
}

/* The value of hex digit c, or -1 when it is none. */
static int hex_value(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

int pcache__unhex(const char *text, void *out, size_t size) {
  uint8_t *p = out;
  if (strlen(text) != 2 * size)
    return -EINVAL;
  for (size_t i = 0; i < size; i++) {
    int hi = hex_value(text[2 * i]), lo = hex_value(text[2 * i + 1]);
    if (hi < 0 || lo < 0)
      return -EINVAL;
    p[i] = (uint8_t)(hi << 4 | lo);
  }
  return 0;
}

void pcache__hash_format(const pcache__hash *hash, char out[33]) {
  pcache__hex(hash->bytes, PCACHE_HASH_SIZE, out);
}

int pcache__hash_parse(const char *text, pcache__hash *ret_hash) {
  pcache__hash h;
  int r = pcache__unhex(text, h.bytes, sizeof h.bytes);
  if (r < 0)
    return r;
  *ret_hash = h;
  return 0;
}
