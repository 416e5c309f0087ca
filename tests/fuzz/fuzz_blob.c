/* Fuzz target: VkPipelineCache header validation, the last check before a
 * blob reaches a driver. Byte 0 picks the device key: a fixed one, or one
 * made from the blob's own header so that matching blobs reach the deeper
 * checks. Whatever passes must really be a version-one header for the key,
 * with headerSize inside the blob. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/blob.h"
#include "common/devkey.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint8_t uuid[PCACHE_UUID_SIZE] = "val-fuzz-uuid-01";
  pcache__devkey key;
  uint8_t *copy;
  int r;
  if (!(copy = fuzz_blob_input(data, size, uuid, &key, &size)))
    return 0;
  r = pcache__blob_check_header(copy, size, &key);
  CHECK(r == 0 || r == PCACHE_EBLOB_SHORT || r == PCACHE_EHEADER_SIZE ||
        r == PCACHE_EHEADER_VERSION || r == PCACHE_EWRONG_VENDOR || r == PCACHE_EWRONG_DEVICE ||
        r == PCACHE_EWRONG_UUID);
  CHECK((r == PCACHE_EBLOB_SHORT) == (size < PCACHE_BLOB_HEADER_SIZE));
  if (r == 0) {
    uint32_t header_size = pcache__le32(copy);
    CHECK(header_size >= PCACHE_BLOB_HEADER_SIZE && header_size <= size);
    CHECK(pcache__le32(copy + 4) == 1);
    CHECK(pcache__le32(copy + 8) == pcache__devkey_vendor(&key));
    CHECK(pcache__le32(copy + 12) == pcache__devkey_device(&key));
    CHECK(memcmp(copy + 16, pcache__devkey_uuid(&key), PCACHE_UUID_SIZE) == 0);
  }
  /* A header written for the key always passes, whatever follows it. */
  if (size >= PCACHE_BLOB_HEADER_SIZE) {
    pcache__blob_write_header(&key, copy);
    CHECK(pcache__blob_check_header(copy, size, &key) == 0);
  }
  free(copy);
  return 0;
}
