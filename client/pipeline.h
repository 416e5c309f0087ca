/* Pipelines (pipeline.c): the create-info path, the tiers, and the
 * pipelines the device context owns. */
#ifndef PCACHE_CLIENT_PIPELINE_H
#define PCACHE_CLIENT_PIPELINE_H

#include "client/device.h"

/* pcache_device_end_frame: publishes what every tier learned this frame. */
void pcache__pipeline_end_frame(pcache_device *device);
/* pcache_device_destroy: frees the tiers and destroys every pipeline the
 * context made. */
void pcache__pipeline_release_all(pcache_device *device);

#endif
