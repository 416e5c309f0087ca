#include "prefetch_cursor.h"

#include <stdio.h>
#include <string.h>

#include "common/alloc.h"

pcd_prefetch_cursor *pcd_prefetch_cursor_new(const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                                             const char *app, int snapshot, size_t n,
                                             uint64_t now_us) {
  pcd_prefetch_cursor *c;
  if (n > PCD_CURSOR_MAX_HASHES)
    return NULL;
  c = pcache__malloc(sizeof *c + n * PCACHE_HASH_SIZE);
  if (!c)
    return NULL;
  memset(c, 0, sizeof *c);
  memcpy(c->device_key, device_key, PCACHE_DEVKEY_SIZE);
  snprintf(c->app, sizeof c->app, "%s", app);
  c->snapshot = snapshot;
  c->made_us = now_us;
  c->n = n;
  return c;
}

int pcd_prefetch_cursor_stale(const pcd_prefetch_cursor *cursor, uint64_t now_us) {
  return now_us - cursor->made_us >= PCD_CURSOR_MAX_AGE_US;
}

int pcd_prefetch_cursor_continues(const pcd_prefetch_cursor *cursor, const uint8_t *device_key,
                                  const char *app, int snapshot, uint64_t offset, uint64_t now_us) {
  return offset > 0 && offset == cursor->next_offset && cursor->at < cursor->n &&
         !snapshot == !cursor->snapshot && !pcd_prefetch_cursor_stale(cursor, now_us) &&
         memcmp(cursor->device_key, device_key, PCACHE_DEVKEY_SIZE) == 0 &&
         strcmp(cursor->app, app) == 0;
}

void pcd_prefetch_cursor_free(pcd_prefetch_cursor *cursor) { pcache__free(cursor); }
