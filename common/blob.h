/* Validation of VkPipelineCache data before anyone stores it or hands it to
 * a driver. A blob with a corrupted body makes some drivers fail
 * vkCreatePipelineCache outright, and one with another device's UUID is
 * accepted silently and never hits (shared/measurements/), so the daemon
 * checks every Put and the client checks every blob it receives. */
#ifndef PCACHE_COMMON_BLOB_H
#define PCACHE_COMMON_BLOB_H

#include <stddef.h>
#include <stdint.h>

#include "devkey.h"

/* sizeof(VkPipelineCacheHeaderVersionOne) */
#define PCACHE_BLOB_HEADER_SIZE 32

/*
 * pcache__blob_check_header - checks the VkPipelineCacheHeaderVersionOne at
 * the start of blob against key: headerSize >= 32 and <= size, headerVersion
 * 1, vendorID, deviceID and pipelineCacheUUID equal to the key's.
 * Returns 0 or PCACHE_EBLOB_SHORT, PCACHE_EHEADER_SIZE,
 * PCACHE_EHEADER_VERSION, PCACHE_EWRONG_VENDOR, PCACHE_EWRONG_DEVICE,
 * PCACHE_EWRONG_UUID. Never reads past size.
 */
int pcache__blob_check_header(const void *blob, size_t size, const pcache__devkey *key);

/* Writes a header for key into out (32 bytes), as a driver would. Tests and
 * tools use it to make blobs. */
void pcache__blob_write_header(const pcache__devkey *key, uint8_t out[PCACHE_BLOB_HEADER_SIZE]);

#endif
