#include "binblob.h"

#include <string.h>

#include <pcache/pcache.h>

#include "blob.h"

size_t pcache__binblob_size(const pcache__binblob *b) {
  size_t size = PCACHE_BINBLOB_FIXED;
  if (b->count == 0 || b->count > PCACHE_BINBLOB_MAX_BINARIES)
    return 0;
  for (uint32_t i = 0; i < b->count; i++) {
    const pcache__binblob_item *it = &b->items[i];
    if (it->key_size == 0 || it->key_size > PCACHE_BINBLOB_MAX_KEY || it->data_size == 0 ||
        it->data_size > PCACHE_BINBLOB_MAX_DATA)
      return 0;
    size += 4 + it->key_size + 8 + (size_t)it->data_size;
  }
  return size;
}

void pcache__binblob_pack(const pcache__devkey *key, const pcache__binblob *b, uint8_t *out) {
  size_t at = PCACHE_BINBLOB_FIXED;
  pcache__blob_write_header(key, out);
  memcpy(out + PCACHE_BLOB_HEADER_SIZE, PCACHE_BINBLOB_MAGIC, 8);
  pcache__put_le32(out + 40, PCACHE_BINBLOB_VERSION);
  pcache__put_le32(out + 44, b->count);
  for (uint32_t i = 0; i < b->count; i++) {
    const pcache__binblob_item *it = &b->items[i];
    pcache__put_le32(out + at, it->key_size);
    memcpy(out + at + 4, it->key, it->key_size);
    at += 4 + it->key_size;
    pcache__put_le64(out + at, it->data_size);
    memcpy(out + at + 8, it->data, (size_t)it->data_size);
    at += 8 + (size_t)it->data_size;
  }
}

int pcache__binblob_parse(const uint8_t *blob, size_t size, const pcache__devkey *key,
                          pcache__binblob *ret) {
  pcache__binblob b;
  size_t at = PCACHE_BINBLOB_FIXED;
  int r = pcache__blob_check_header(blob, size, key);
  if (r != 0)
    return r;
  /* The header's own size is the driver's to choose in a VkPipelineCache
   * blob; here it is always 32, the fields right after it. */
  if (size < PCACHE_BINBLOB_FIXED || pcache__le32(blob) != PCACHE_BLOB_HEADER_SIZE ||
      memcmp(blob + PCACHE_BLOB_HEADER_SIZE, PCACHE_BINBLOB_MAGIC, 8) != 0 ||
      pcache__le32(blob + 40) != PCACHE_BINBLOB_VERSION)
    return PCACHE_EBINARY;
  b.count = pcache__le32(blob + 44);
  if (b.count == 0 || b.count > PCACHE_BINBLOB_MAX_BINARIES)
    return PCACHE_EBINARY;
  for (uint32_t i = 0; i < b.count; i++) {
    pcache__binblob_item *it = &b.items[i];
    /* Each length is checked against what is left before it is used. */
    if (size - at < 4)
      return PCACHE_EBINARY;
    it->key_size = pcache__le32(blob + at);
    at += 4;
    if (it->key_size == 0 || it->key_size > PCACHE_BINBLOB_MAX_KEY || size - at < it->key_size)
      return PCACHE_EBINARY;
    it->key = blob + at;
    at += it->key_size;
    if (size - at < 8)
      return PCACHE_EBINARY;
    it->data_size = pcache__le64(blob + at);
    at += 8;
    if (it->data_size == 0 || it->data_size > PCACHE_BINBLOB_MAX_DATA || size - at < it->data_size)
      return PCACHE_EBINARY;
    it->data = blob + at;
    at += (size_t)it->data_size;
  }
  if (at != size)
    return PCACHE_EBINARY;
  *ret = b;
  return 0;
}
