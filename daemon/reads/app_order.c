#include "app_order.h"

#include <stdlib.h>
#include <string.h>

void pcd_order_ref_of(const pcd_entry *e, pcd_order_ref *ret) {
  memcpy(ret->key, e->key, PCD_ENTRY_KEY_SIZE);
  ret->kind = e->kind;
  ret->blob_size = e->blob_size;
  ret->checksum = e->checksum;
  ret->last_used_us = e->last_used_us;
}

typedef struct collected {
  pcd_order_vec *ev;
  uint64_t newest_us;
} collected;

static int collect_entry(void *ctx, const pcd_entry *e) {
  collected *c = ctx;
  pcd_order_ref ref;
  pcd_order_ref_of(e, &ref);
  if (ref.last_used_us > c->newest_us)
    c->newest_us = ref.last_used_us;
  return pcache_vec_push(c->ev, ref);
}

int pcd_order_collect(pcd_txn *txn, const uint8_t *devkey, const char *app, pcd_order_vec *ev,
                      uint64_t *ret_newest_us) {
  collected col = {ev, 0};
  int r = pcd_app_foreach(txn, devkey, app, collect_entry, &col);
  *ret_newest_us = col.newest_us;
  return r;
}

static int by_recent(const void *a, const void *b) {
  const pcd_order_ref *x = a, *y = b;
  if (x->last_used_us != y->last_used_us)
    return x->last_used_us < y->last_used_us ? 1 : -1;
  return memcmp(x->key, y->key, PCD_ENTRY_KEY_SIZE);
}

void pcd_order_sort(pcd_order_vec *ev) {
  if (ev->n)
    qsort(ev->items, ev->n, sizeof *ev->items, by_recent);
}

size_t pcd_order_likely(const pcd_order_vec *ev, uint64_t newest_us, const pcd_config *cfg) {
  size_t n = ev->n < cfg->prefetch_max ? ev->n : cfg->prefetch_max;
  uint64_t window_us = cfg->prefetch_window_s * 1000000u;
  if (!cfg->prefetch_window_s)
    return n;
  for (size_t i = 0; i < n; i++)
    if (newest_us - ev->items[i].last_used_us > window_us)
      return i;
  return n;
}
