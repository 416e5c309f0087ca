/* Pipelines (pipeline.c): the create-info path, the tiers, and the
 * pipelines the device context owns. */
#ifndef PCACHE_CLIENT_PIPELINE_H
#define PCACHE_CLIENT_PIPELINE_H

#include "client/core.h"

struct pcache_tier {
  struct pcache_device *device;
  uint64_t key;        /* its key in by_hash or by_app; set before it is shared */
  pcache__table table; /* app draw key or state hash -> VkPipeline */
};

/* The context's tiers (pcache_tier_*). */
typedef struct pcache__tiers {
  pcache__table by_hash; /* tier1_key -> pcache_tier * (by state hash) */
  pcache__table by_app;  /* app global key -> pcache_tier * (by draw key) */
  /* The by_hash tier the last create info went to. Most apps draw into a
   * few kinds of render target, so pipelines in a row mostly share one;
   * a match skips by_hash's lock, which every lookup takes until
   * end_frame publishes the tiers (a start-up makes all its pipelines
   * before its first frame). Tiers live as long as the context. */
  _Atomic(pcache_tier *) last;
  pthread_mutex_t lock;  /* guards the list of tiers, for end_frame */
  PCACHE_VEC(pcache_tier *) list;
} pcache__tiers;

/* pcache_device_end_frame: publishes what every tier learned this frame. */
void pcache__pipeline_end_frame(pcache_device *device);
/* pcache_device_destroy: frees the tiers and destroys every pipeline the
 * context made. */
void pcache__pipeline_release_all(pcache_device *device);

#endif
