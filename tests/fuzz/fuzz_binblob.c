/* Fuzz target: the pipeline-binary container parser (common/binblob.h),
 * which reads a stored or fleet-fetched blob before its binaries go to
 * vkCreatePipelineBinariesKHR. Byte 0 picks the device key: a fixed one,
 * or one made from the container's own header so that matching bytes
 * reach the magic, count and size checks. Whatever passes must name only
 * bytes inside the container, keep every limit, add up to its size
 * exactly, and pack back to the same bytes after the header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/binblob.h"
#include "common/blob.h"
#include "common/bytes.h"
#include "common/devkey.h"
#include "fuzz.h"

/* [p, p + n) lies inside [base, base + size). */
static int inside(const uint8_t *base, size_t size, const uint8_t *p, uint64_t n) {
  return p >= base && p <= base + size && n <= (uint64_t)(base + size - p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const uint8_t uuid[PCACHE_UUID_SIZE] = "bin-fuzz-uuid-01";
  pcache__devkey key;
  pcache__binblob b, untouched;
  uint8_t *copy, *again;
  int r;
  if (!(copy = fuzz_blob_input(data, size, uuid, &key, &size)))
    return 0;
  memset(&b, 0xa5, sizeof b);
  untouched = b;
  r = pcache__binblob_parse(copy, size, &key, &b);
  CHECK(r == 0 || memcmp(&b, &untouched, sizeof b) == 0);
  CHECK(r == 0 || r == PCACHE_EBINARY || r == PCACHE_EBLOB_SHORT || r == PCACHE_EHEADER_SIZE ||
        r == PCACHE_EHEADER_VERSION || r == PCACHE_EWRONG_VENDOR || r == PCACHE_EWRONG_DEVICE ||
        r == PCACHE_EWRONG_UUID);
  if (r == 0) {
    CHECK(b.count >= 1 && b.count <= PCACHE_BINBLOB_MAX_BINARIES);
    for (uint32_t i = 0; i < b.count; i++) {
      const pcache__binblob_item *it = &b.items[i];
      CHECK(it->key_size >= 1 && it->key_size <= PCACHE_BINBLOB_MAX_KEY);
      CHECK(it->data_size >= 1 && it->data_size <= PCACHE_BINBLOB_MAX_DATA);
      CHECK(inside(copy, size, it->key, it->key_size));
      CHECK(inside(copy, size, it->data, it->data_size));
    }
    CHECK(pcache__binblob_size(&b) == size);
    /* Packed again for the same key, the same binaries: the same bytes
     * after the header, which parse again. */
    again = malloc(size);
    if (again) {
      pcache__binblob b2;
      pcache__binblob_pack(&key, &b, again);
      CHECK(memcmp(again + PCACHE_BLOB_HEADER_SIZE, copy + PCACHE_BLOB_HEADER_SIZE,
                   size - PCACHE_BLOB_HEADER_SIZE) == 0);
      CHECK(pcache__binblob_parse(again, size, &key, &b2) == 0 && b2.count == b.count);
      free(again);
    }
  }
  free(copy);
  return 0;
}
