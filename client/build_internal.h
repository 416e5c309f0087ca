/* What build.c and build_compile.c share (build.h says what building a
 * pipeline is). build.c, the order of sources (daemon, device cache,
 * driver first), calls build_compile.c, the pipeline creation and the
 * compile paths (staging, binary capture, the fresh cache kept and
 * uploaded); never the other way. Each function's comment is at its
 * definition. */
#ifndef PCACHE_CLIENT_BUILD_INTERNAL_H
#define PCACHE_CLIENT_BUILD_INTERNAL_H

#include "client/build.h"

/* What the built table says of a state hash this process built (and
 * build_first's *ret_held): the device cache holds it; the driver's own
 * caches served it; or it was compiled as the program would and staged. */
enum { BUILT_IN_CACHE = 1, BUILT_BY_DRIVER = 2, BUILT_STAGED = 3 };

/* Misses of the driver-first probe, with no hit, after which prefetched
 * pipelines are no longer asked of the driver (build.c). */
#define PCACHE__PROBE_MISSES 16

VkResult pcache__build_create(pcache_device *device, const pcache__build *build,
                              VkPipelineCache cache, VkPipelineCreateFlags extra_flags,
                              VkBaseOutStructure *prepend, VkPipeline *ret_pipeline);
VkResult pcache__build_create_cached(pcache_device *device, const pcache__build *build,
                                     int in_app_cache, VkPipeline *ret_pipeline);
int pcache__build_merge_app_cache(pcache_device *device, const pcache__build *build,
                                  VkPipelineCache src);
VkResult pcache__build_as_program(pcache_device *device, const pcache__build *build,
                                  VkPipeline *ret_pipeline);
VkResult pcache__build_compile(pcache_device *device, const pcache__build *build,
                               const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                               VkPipeline *ret_pipeline, int *ret_held);

#endif
