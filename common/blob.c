#include "blob.h"

#include <string.h>

#include <pcache/pcache.h>

/* VkPipelineCacheHeaderVersionOne: headerSize, headerVersion, vendorID,
 * deviceID (u32 each, little-endian on every platform pcache runs on), then
 * pipelineCacheUUID[16]. Read byte-wise: blobs arrive unaligned. */
int pcache__blob_check_header(const void *blob, size_t size, const pcache__devkey *key) {
  const uint8_t *p = blob;
  if (!blob || size < PCACHE_BLOB_HEADER_SIZE)
    return PCACHE_EBLOB_SHORT;
  uint32_t header_size = pcache__le32(p);
  if (header_size < PCACHE_BLOB_HEADER_SIZE || header_size > size)
    return PCACHE_EHEADER_SIZE;
  if (pcache__le32(p + 4) != VK_PIPELINE_CACHE_HEADER_VERSION_ONE)
    return PCACHE_EHEADER_VERSION;
  if (pcache__le32(p + 8) != pcache__devkey_vendor(key))
    return PCACHE_EWRONG_VENDOR;
  if (pcache__le32(p + 12) != pcache__devkey_device(key))
    return PCACHE_EWRONG_DEVICE;
  if (memcmp(p + 16, pcache__devkey_uuid(key), PCACHE_UUID_SIZE) != 0)
    return PCACHE_EWRONG_UUID;
  return 0;
}

void pcache__blob_write_header(const pcache__devkey *key, uint8_t out[PCACHE_BLOB_HEADER_SIZE]) {
  pcache__put_le32(out, PCACHE_BLOB_HEADER_SIZE);
  pcache__put_le32(out + 4, VK_PIPELINE_CACHE_HEADER_VERSION_ONE);
  pcache__put_le32(out + 8, pcache__devkey_vendor(key));
  pcache__put_le32(out + 12, pcache__devkey_device(key));
  memcpy(out + 16, pcache__devkey_uuid(key), PCACHE_UUID_SIZE);
}
