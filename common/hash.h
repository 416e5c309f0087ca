/* Hashing: XXH3-128 for identities (state hashes, SPIR-V, objects),
 * XXH3-64 for blob checksums. One place decides the seed (0) and the byte
 * order of the 16-byte form, so every part of pcache agrees on both. */
#ifndef PCACHE_COMMON_HASH_H
#define PCACHE_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define PCACHE_HASH_SIZE 16

typedef struct pcache__hash {
  uint8_t bytes[PCACHE_HASH_SIZE]; /* XXH128_canonical_t: big-endian high64, low64 */
} pcache__hash;

void pcache__hash128(const void *data, size_t size, pcache__hash *ret_hash);
/* XXH3-64, with the widest vector instructions this CPU has that pcache
 * was built for (AVX2 on x86-64, picked at run time; hash_simd.h). */
uint64_t pcache__checksum64(const void *data, size_t size);
/* The same, always with the baseline build (tests compare the two). */
uint64_t pcache__checksum64_portable(const void *data, size_t size);
/* Which build pcache__checksum64 uses here: "avx2" or "baseline". */
const char *pcache__checksum64_build(void);

static inline int pcache__hash_equal(const pcache__hash *a, const pcache__hash *b) {
  return memcmp(a->bytes, b->bytes, PCACHE_HASH_SIZE) == 0;
}

/* 32 lowercase hex digits and a NUL into out (33 bytes). */
void pcache__hash_format(const pcache__hash *hash, char out[33]);
/* Parses 32 hex digits; returns 0 or -EINVAL. */
int pcache__hash_parse(const char *text, pcache__hash *ret_hash);

/* Hex of any byte string into out (2 * size + 1 bytes). */
void pcache__hex(const void *data, size_t size, char *out);
/* Parses exactly 2 * size hex digits into out; returns 0 or -EINVAL. */
int pcache__unhex(const char *text, void *out, size_t size);

#endif
