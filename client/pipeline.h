/* Pipelines (pipeline.c): the create-info path, the tiers, and the
 * pipelines the device context owns. */
#ifndef PCACHE_CLIENT_PIPELINE_H
#define PCACHE_CLIENT_PIPELINE_H

#include "client/core.h"

struct pcache_tier {
  struct pcache_device *device;
  pcache__table table; /* app draw key or state hash -> VkPipeline */
};

/* The context's tiers (pcache_tier_*). */
typedef struct pcache__tiers {
  pcache__table by_hash; /* tier1_key -> pcache_tier * (by state hash) */
  pcache__table by_app;  /* app global key -> pcache_tier * (by draw key) */
  pthread_mutex_t lock;  /* guards the list of tiers, for end_frame */
  PCACHE_VEC(pcache_tier *) list;
} pcache__tiers;

/* pcache_device_end_frame: publishes what every tier learned this frame. */
void pcache__pipeline_end_frame(pcache_device *device);
/* pcache_device_destroy: frees the tiers and destroys every pipeline the
 * context made. */
void pcache__pipeline_release_all(pcache_device *device);

#endif
