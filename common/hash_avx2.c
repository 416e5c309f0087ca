/* XXH3-64 built for AVX2 (this file alone is compiled with -mavx2;
 * common/CMakeLists.txt). hash.c calls it only on a CPU that has AVX2.
 * XXH3's result does not depend on the instructions that compute it, so
 * a checksum made either way matches the other. */
#include "hash_simd.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

uint64_t pcache__checksum64_avx2(const void *data, size_t size) { return XXH3_64bits(data, size); }
