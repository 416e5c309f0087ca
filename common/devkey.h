/* The device key: which driver build a pipeline-cache blob belongs to.
 *
 *   bytes  0..15  pipelineCacheUUID
 *   bytes 16..19  vendorID        (u32 little-endian)
 *   bytes 20..23  deviceID
 *   bytes 24..27  driverVersion
 *   bytes 28..31  driver ABI: the client's pointer size in bytes
 *
 * Some drivers keep one UUID across driver updates or across their 32- and
 * 64-bit builds and crash on the other's data, so the key holds all of it. */
#ifndef PCACHE_COMMON_DEVKEY_H
#define PCACHE_COMMON_DEVKEY_H

#include <stdint.h>

#include "common/bytes.h"

#define PCACHE_DEVKEY_SIZE 32
#define PCACHE_UUID_SIZE 16

typedef struct pcache__devkey {
  uint8_t bytes[PCACHE_DEVKEY_SIZE];
} pcache__devkey;

void pcache__devkey_make(const uint8_t uuid[PCACHE_UUID_SIZE], uint32_t vendor_id,
                         uint32_t device_id, uint32_t driver_version, uint32_t driver_abi,
                         pcache__devkey *ret_key);

/*
 * pcache__devkey_binary - the key of a device's VK_KHR_pipeline_binary
 * entries: base (the device's VkPipelineCache key) with its UUID replaced by
 * the first 16 bytes of XXH3-128 over a fixed tag, base's UUID and the
 * driver's global pipeline key (vkGetPipelineKeyKHR with no create info,
 * global_key_size <= 32 bytes), and PCACHE_DEVKEY_ABI_BINARY added to its
 * ABI. Binary entries then never meet VkPipelineCache blobs, and a change
 * of the global key is a new key of the same vendor, device and ABI: it
 * supersedes the old one as a driver update does (docs/replay.md). The ABI
 * mark keeps the two kinds of one driver from superseding each other: a
 * program with binaries off must not start a replay that retires the
 * binary entries, nor the other way round.
 */
#define PCACHE_DEVKEY_ABI_BINARY 0x10000u
void pcache__devkey_binary(const pcache__devkey *base, const uint8_t *global_key,
                           uint32_t global_key_size, pcache__devkey *ret_key);

/*
 * pcache__devkey_staged - the key staged builds for device key base are
 * filed under in the store (Put.stage, docs/replay.md "Staged builds"):
 * base with PCACHE_DEVKEY_ABI_STAGED added to its ABI. Its entries are
 * descriptions (with a seed blob, or none) that the replayer builds for
 * base; no client asks for that key, and with its own ABI it never
 * supersedes base nor is superseded by it as a driver update would be.
 * pcache__devkey_is_staged tells such a key; pcache__devkey_unstaged gives
 * back base.
 */
#define PCACHE_DEVKEY_ABI_STAGED 0x20000u
void pcache__devkey_staged(const pcache__devkey *base, pcache__devkey *ret_key);
int pcache__devkey_is_staged(const pcache__devkey *key);
void pcache__devkey_unstaged(const pcache__devkey *staged, pcache__devkey *ret_key);

const uint8_t *pcache__devkey_uuid(const pcache__devkey *key);
uint32_t pcache__devkey_vendor(const pcache__devkey *key);
uint32_t pcache__devkey_device(const pcache__devkey *key);
uint32_t pcache__devkey_driver_version(const pcache__devkey *key);
uint32_t pcache__devkey_abi(const pcache__devkey *key);

/* "8-4-4-4-12" UUID text (36 chars + NUL). */
void pcache__uuid_format(const uint8_t uuid[PCACHE_UUID_SIZE], char out[37]);
/* Parses a UUID with or without dashes; 0 or -EINVAL. */
int pcache__uuid_parse(const char *text, uint8_t ret_uuid[PCACHE_UUID_SIZE]);

/* The whole key as 64 hex digits (65 bytes with NUL), and back. */
void pcache__devkey_format(const pcache__devkey *key, char out[65]);
int pcache__devkey_parse(const char *text, pcache__devkey *ret_key);

#endif
