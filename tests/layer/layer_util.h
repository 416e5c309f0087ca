/* What the layer tests share: a scratch daemon with the layer enabled
 * through the build tree's manifest, and the layer's report
 * (PCACHE_LAYER_STATS_FILE, docs/layer.md) read back. */
#ifndef PCACHE_TESTS_LAYER_UTIL_H
#define PCACHE_TESTS_LAYER_UTIL_H

#include "harness.h"

typedef struct layer_report {
  unsigned long long pipelines, hashable, daemon_hits, local_hits, compiles, uploaded, unhashable,
      passed_through, app_cache_entries, upload_dropped, driver_hits;
  int lines;            /* "pcache-layer" lines: one per device */
  int unhashable_lines; /* "pcache-layer-unhashable" lines */
  unsigned unhashable_stype;
  char unhashable_reason[64];
  char app[64]; /* the last report's app= */
} layer_report;

/* test_env_init, the layer's environment, then the daemon. */
void layer_test_start(test_env *env, const char *name);

/* Reads the reports written since the last call (summing the devices') and
 * removes the file. */
void layer_report_read(layer_report *report);

#endif
