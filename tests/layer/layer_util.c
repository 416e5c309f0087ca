/* See layer_util.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "layer_util.h"
#include "test.h"

static char stats_path[400];

void layer_test_start(test_env *env, const char *name) {
  test_env_init(env, name);
  snprintf(stats_path, sizeof stats_path, "%s/layer-stats", env->root);
  setenv("XDG_DATA_HOME", PCACHE_LAYER_DATA_HOME, 1);
  setenv("PCACHE_LAYER", "1", 1);
  setenv("PCACHE_LAYER_STATS_FILE", stats_path, 1);
  /* Generous: device destruction sends the uploads within it, and a slow
   * machine must not turn that into a lost upload. */
  setenv("PCACHE_TIMEOUT_MS", "3000", 1);
  test_daemon_start(env, NULL);
}

void layer_report_read(layer_report *r) {
  char line[1024];
  FILE *f = fopen(stats_path, "r");
  memset(r, 0, sizeof *r);
  if (!f)
    return;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "pcache-layer ", 13) == 0) {
      layer_report one;
      const char *p = strstr(line, " pipelines="), *app = strstr(line, " app=");
      ASSERT_TRUE(p != NULL && app != NULL);
      ASSERT_EQ(sscanf(app, " app=%63s", r->app), 1);
      ASSERT_EQ(sscanf(p,
                       " pipelines=%llu hashable=%llu daemon_hits=%llu local_hits=%llu "
                       "compiles=%llu uploaded=%llu unhashable=%llu passed_through=%llu "
                       "app_cache_entries=%llu upload_dropped=%llu driver_hits=%llu",
                       &one.pipelines, &one.hashable, &one.daemon_hits, &one.local_hits,
                       &one.compiles, &one.uploaded, &one.unhashable, &one.passed_through,
                       &one.app_cache_entries, &one.upload_dropped, &one.driver_hits),
                11);
      r->pipelines += one.pipelines;
      r->hashable += one.hashable;
      r->daemon_hits += one.daemon_hits;
      r->local_hits += one.local_hits;
      r->compiles += one.compiles;
      r->uploaded += one.uploaded;
      r->unhashable += one.unhashable;
      r->passed_through += one.passed_through;
      r->app_cache_entries += one.app_cache_entries;
      r->upload_dropped += one.upload_dropped;
      r->driver_hits += one.driver_hits;
      r->lines++;
    } else if (strncmp(line, "pcache-layer-unhashable ", 24) == 0) {
      const char *p = strstr(line, " reason=");
      ASSERT_TRUE(p != NULL);
      ASSERT_EQ(sscanf(p, " reason=%63s stype=%u", r->unhashable_reason, &r->unhashable_stype), 2);
      r->unhashable_lines++;
    }
  }
  fclose(f);
  unlink(stats_path);
}
