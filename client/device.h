/* The device context (struct pcache_device): the common core (core.h)
 * and each concern's own state, declared in that concern's header, put
 * together; and its constructor (device.c), which creates and destroys
 * them. A concern that takes only its own struct and the core (binary.c,
 * record.c, owned.c) needs nothing of this header; the others still take
 * the whole context and include it. */
#ifndef PCACHE_CLIENT_DEVICE_H
#define PCACHE_CLIENT_DEVICE_H

#include "client/appcache.h"
#include "client/build.h"
#include "client/core.h"
#include "client/owned.h"
#include "client/pipeline.h"
#include "client/segment.h"
#include "client/snapshot.h"
#include "client/upload.h"

struct pcache_device {
  /* What every concern shares (core.h). */
  pcache__core core;
  pcache__build_state build;       /* build.h */
  pcache__tiers tiers;             /* pipeline.h */
  pcache__owned owned;             /* owned.h */
  pcache__appcache_state appcache; /* appcache.h */
  pcache__uploader upload;         /* upload.h */
  pcache__snapshot_state snapshot; /* snapshot.h */
  pcache__segment_state segment;   /* segment.h */
  /* Misses without a stall (fastlink.h): NULL unless pcache_device_info.
   * fast_link asked for it and the device can. */
  struct pcache__fastlink *fastlink;
};

/*
 * pcache__device_create - the core of pcache_device_create, shared by
 * libpcache (client/loader.c, which checks the app's struct and defaults
 * gipa to the loader's) and the Vulkan layer (which passes the next
 * layer's entry points). gdpa may be NULL: then gipa's vkGetDeviceProcAddr.
 * Nothing here references a symbol of the Vulkan loader, so the layer can
 * link it without binding to an app's globals named like Vulkan functions.
 * Returns 0, -ENOMEM, -EINVAL, or PCACHE_EVULKAN when the driver refuses
 * the cache (its VkResult stored through info->ret_vk_result).
 */
int pcache__device_create(pcache_client *client, const pcache_device_info *info,
                          PFN_vkGetInstanceProcAddr gipa, PFN_vkGetDeviceProcAddr gdpa,
                          pcache_device **ret_device);

#endif
