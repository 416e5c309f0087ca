/* A set of app names: see app_set.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "app_set.h"
#include "common/alloc.h"
#include "common/hash.h"
#include "common/vec.h"

static uint64_t name_key(const char *app) { return pcache__checksum64(app, strlen(app)); }

static uint64_t hash_at(const void *ctx, size_t pos) {
  return name_key(((const pcd_app_set *)ctx)->apps[pos]);
}

struct probe {
  const pcd_app_set *set;
  const char *app;
};

static int name_at(const void *ctx, size_t pos) {
  const struct probe *p = ctx;
  return strcmp(p->set->apps[pos], p->app) == 0;
}

int pcd_app_set_has(const pcd_app_set *set, const char *app) {
  struct probe p = {set, app};
  if (!set->n)
    return 0;
  return pcd_pos_index_find(&set->index, name_key(app), name_at, &p) >= 0;
}

int pcd_app_set_add(pcd_app_set *set, const char *app) {
  if (!*app || strlen(app) > PCD_MAX_APP || pcd_app_set_has(set, app))
    return 0;
  if (pcache__vec_reserve((void **)&set->apps, &set->cap, set->n + 1, sizeof *set->apps, 16) < 0)
    return -ENOMEM;
  snprintf(set->apps[set->n], sizeof set->apps[0], "%s", app);
  if (pcd_pos_index_add(&set->index, name_key(app), set->n, hash_at, set) < 0)
    return -ENOMEM;
  set->n++;
  return 0;
}

void pcd_app_set_free(pcd_app_set *set) {
  pcache__free(set->apps);
  pcd_pos_index_free(&set->index);
  memset(set, 0, sizeof *set);
}
