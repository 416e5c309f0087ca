/* Little-endian integers inside byte strings: blob headers, device keys,
 * the store's records and the archive's. Byte-wise, so the bytes may sit
 * at any alignment (blobs arrive unaligned). */
#ifndef PCACHE_COMMON_BYTES_H
#define PCACHE_COMMON_BYTES_H

#include <stdint.h>

static inline uint32_t pcache__le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline void pcache__put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t pcache__le64(const uint8_t *p) {
  return (uint64_t)pcache__le32(p) | (uint64_t)pcache__le32(p + 4) << 32;
}

static inline void pcache__put_le64(uint8_t *p, uint64_t v) {
  pcache__put_le32(p, (uint32_t)v);
  pcache__put_le32(p + 4, (uint32_t)(v >> 32));
}

#endif
