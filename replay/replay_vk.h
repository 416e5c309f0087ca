/* The replayer's Vulkan side (replay_vk.c): the device whose key a replay
 * builds for, and one stored description built on it into a blob. */
#ifndef PCACHE_REPLAY_REPLAY_VK_H
#define PCACHE_REPLAY_REPLAY_VK_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/devkey.h"
#include "proto/pcache.pb-c.h"
#include "replay/keep.h"
#include "replay/module_pool.h"

typedef struct pcache__replay_vk pcache__replay_vk;

/*
 * pcache__replay_vk_open - a VkDevice (replay_device.h) on the physical device whose key
 * (common/devkey.h, this process's ABI) is want. For a binary key
 * (PCACHE_DEVKEY_ABI_BINARY) the device is made with VK_KHR_pipeline_binary
 * on each candidate until one's binary key, from its global pipeline key
 * now, is want; its builds are then binary containers. Returns 0,
 * PCACHE_ENOT_FOUND (no such device here), -ENOMEM or -EIO.
 */
int pcache__replay_vk_open(const pcache__devkey *want, pcache__replay_vk **ret_vk);
void pcache__replay_vk_close(pcache__replay_vk *vk);

/* The most physical devices looked at (a machine has a handful), and the
 * most keys --list-keys prints: each device's, and with binary its
 * binary key too (pcached's probe reads as many, replay_detect.c). */
#define PCACHE_REPLAY_VK_MAX_DEVICES 16
#define PCACHE_REPLAY_VK_MAX_KEYS (2 * PCACHE_REPLAY_VK_MAX_DEVICES)

/*
 * pcache__replay_vk_list - writes one line per physical device to out:
 * its key (64 hex digits, as a client on it computes it, this process's
 * ABI), then, each after a tab, the device's name, the driver's name and
 * its info (empty below Vulkan 1.2; control characters written as '?').
 * binary: a device with VK_KHR_pipeline_binary, VK_KHR_maintenance5, the
 * pipelineBinaries feature and Vulkan 1.3 also gets a second line of the
 * same form with its binary key (PCACHE_DEVKEY_ABI_BINARY in the ABI
 * word), the key a client in binary mode names: the one VkDevice this
 * makes per such device (made and destroyed for it; tens of ms on real
 * drivers) asks the driver's global pipeline key as a binary replay does.
 * Otherwise makes no device. Returns 0, PCACHE_ENOT_FOUND (no driver, or
 * no device), -EIO, or -errno (writing out).
 */
int pcache__replay_vk_list(FILE *out, int binary);

/* The DeviceInfo a Put of this device carries (valid until close). */
const Pcachepb__DeviceInfo *pcache__replay_vk_info(const pcache__replay_vk *vk);

/* Where one build's time went (pcache__replay_vk_build adds to it). */
typedef struct pcache__replay_times {
  uint64_t decode_ns;  /* the description into create infos */
  uint64_t objects_ns; /* modules (those the pool lacks), layouts, render pass */
  uint64_t compile_ns; /* vkCreate*Pipelines into the fresh cache */
  uint64_t data_ns;    /* vkGetPipelineCacheData, the header check, teardown
                        * (and whatever a failed build had left) */
  uint64_t seeded;     /* builds whose cache the driver made from a seed */
} pcache__replay_times;

/* The device, for a pcache__module_pool of the caller's thread. */
VkDevice pcache__replay_vk_device(const pcache__replay_vk *vk);

/*
 * pcache__replay_vk_build - decodes desc, makes its objects and the
 * pipeline on the device with a fresh VkPipelineCache, and returns that
 * cache's data, checked against the device key (pcache__malloc'ed, the
 * caller frees it). On a binary key's device: the pipeline captured, no
 * cache, its binaries in a container for that key (client/binary.h); the
 * seed is not used. modules give the SPIR-V the description names. A
 * seed (a staged item's blob, ReplayItem.seed; seed_size 0: none) is the
 * cache's initial data when its header names the device; one the driver
 * refuses is left out, not a failure.
 * The modules come from pool (the calling thread's own; NULL: made and
 * destroyed here). The pipeline goes to keep (NULL: destroyed here).
 * Thread-safe (one VkDevice, Vulkan's own external synchronization rules
 * kept: every object is the call's or its thread's own). Returns 0,
 * PCACHE_EBAD_DESC, PCACHE_EMISSING_MODULE, PCACHE_EBAD_BLOB (the
 * driver's data does not match its own key), PCACHE_ECAPTURE (the
 * driver's capture gave no binaries, or more or larger ones than a
 * container holds), -ENOMEM or -EIO (the driver refused something).
 */
int pcache__replay_vk_build(pcache__replay_vk *vk, pcache__module_pool *pool,
                            pcache__replay_keep *keep, const uint8_t *desc, size_t desc_size,
                            Pcachepb__Module *const *modules, size_t n_modules, const uint8_t *seed,
                            size_t seed_size, uint8_t **ret_blob, size_t *ret_size,
                            uint64_t *ret_ns, pcache__replay_times *times);

/* What a user can do about a build that failed with err, for its reason
 * in pcachectl status; NULL where there is nothing to add. */
const char *pcache__replay_vk_fix(int err);

#endif
