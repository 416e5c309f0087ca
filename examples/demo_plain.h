/* pcache-demo --plain (demo_plain.c). */
#ifndef PCACHE_EXAMPLES_DEMO_PLAIN_H
#define PCACHE_EXAMPLES_DEMO_PLAIN_H

#include "demo_vk.h"

/*
 * --plain: the same pipelines with no pcache code, as an app that never
 * heard of pcache builds them: plain objects, vkCreateGraphicsPipelines
 * with the app's own cache (--cache-file) or none, on --threads threads
 * (bench/run-replay.sh compares the replayer with it, thread for thread).
 * With PCACHE_LAYER=1 the Vulkan layer serves it; its report
 * (PCACHE_LAYER_STATS=1) says how.
 */
int demo_run_plain(const demo_options *opts, const demo_vk *vk, double device_ms);

#endif
