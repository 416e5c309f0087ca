/* The checksum's wider builds, chosen at run time by hash.c
 * (pcache__checksum64): XXH3-64 compiled for baseline x86-64 uses SSE2,
 * and a blob's checksum is bound by that, not by memory (14 GB/s against
 * 24-26 with AVX2 over 200 MB on the development machine). Internal to
 * common/. */
#ifndef PCACHE_COMMON_HASH_SIMD_H
#define PCACHE_COMMON_HASH_SIMD_H

#include <stddef.h>
#include <stdint.h>

#ifdef PCACHE_HAVE_CHECKSUM_AVX2
uint64_t pcache__checksum64_avx2(const void *data, size_t size);
#endif

#endif
