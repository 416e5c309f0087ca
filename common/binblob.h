/* The container a device's VK_KHR_pipeline_binary entries are stored in
 * (docs/storage.md, "Pipeline-binary containers"): the binaries of one
 * pipeline, each its key and its data, behind a header shaped like
 * VkPipelineCacheHeaderVersionOne that carries the binary device key's UUID,
 * vendor and device (common/devkey.h, pcache__devkey_binary). The daemon's
 * Put and verify checks (common/blob.c) accept it unchanged, and a
 * VkPipelineCache path handed one by mistake refuses it: its UUID is no
 * driver's pipelineCacheUUID.
 *
 *   bytes  0..31   the header (pcache__blob_write_header of the binary key)
 *   bytes 32..39   magic "PCBINv1\n"
 *   bytes 40..43   format version (1), u32 little-endian
 *   bytes 44..47   binary count, 1..PCACHE_BINBLOB_MAX_BINARIES
 *   then per binary: u32 key size (1..32), the key bytes, u64 data size
 *   (1..PCACHE_BINBLOB_MAX_DATA), the data bytes; nothing after the last.
 */
#ifndef PCACHE_COMMON_BINBLOB_H
#define PCACHE_COMMON_BINBLOB_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"

#define PCACHE_BINBLOB_MAGIC "PCBINv1\n"
#define PCACHE_BINBLOB_VERSION 1u
#define PCACHE_BINBLOB_FIXED 48 /* header, magic, version, count */
/* A pipeline has one binary per stage on the drivers measured (at most the
 * five graphics stages and a few internal ones): 16 leaves room. */
#define PCACHE_BINBLOB_MAX_BINARIES 16u
#define PCACHE_BINBLOB_MAX_KEY 32u           /* VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR */
#define PCACHE_BINBLOB_MAX_DATA (256u << 20) /* one binary: far above any measured */

typedef struct pcache__binblob_item {
  uint32_t key_size;
  const uint8_t *key;
  uint64_t data_size;
  const uint8_t *data;
} pcache__binblob_item;

/* One container's binaries; parsed ones point into the container's bytes. */
typedef struct pcache__binblob {
  uint32_t count;
  pcache__binblob_item items[PCACHE_BINBLOB_MAX_BINARIES];
} pcache__binblob;

/* The container's size for b, or 0 when b breaks a limit above. */
size_t pcache__binblob_size(const pcache__binblob *b);

/* Writes b's container for key into out (pcache__binblob_size bytes). */
void pcache__binblob_pack(const pcache__devkey *key, const pcache__binblob *b, uint8_t *out);

/*
 * pcache__binblob_parse - checks a container against key and fills *ret
 * with pointers into blob. Checks the header (pcache__blob_check_header's
 * codes), then the magic and version (PCACHE_EBINARY), the count, each key
 * and data size and that they add up to size exactly (PCACHE_EBINARY).
 * Never reads past size. 0, or the code; *ret is untouched on failure.
 */
int pcache__binblob_parse(const uint8_t *blob, size_t size, const pcache__devkey *key,
                          pcache__binblob *ret);

#endif
