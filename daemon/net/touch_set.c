#include "touch_set.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bytes.h"

struct probe {
  const pcd_touch_set *set;
  const uint8_t *key;
};

/* Entry keys end in a state hash (XXH3-128 of the description): its bytes
 * are already well mixed. */
static uint64_t key_hash(const uint8_t key[PCD_ENTRY_KEY_SIZE]) {
  return pcache__le64(key + PCACHE_DEVKEY_SIZE) ^ pcache__le64(key);
}

static uint64_t hash_at(const void *ctx, size_t pos) {
  return key_hash(((const pcd_touch_set *)ctx)->v[pos].key);
}

static int key_at(const void *ctx, size_t pos) {
  const struct probe *p = ctx;
  return memcmp(p->set->v[pos].key, p->key, PCD_ENTRY_KEY_SIZE) == 0;
}

int pcd_touch_set_add(pcd_touch_set *s, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t now_us) {
  struct probe p = {s, key};
  uint64_t h = key_hash(key);
  long at = pcd_pos_index_find(&s->index, h, key_at, &p);
  pcd_touch *t;
  if (at >= 0) {
    t = &s->v[at];
    if (now_us > t->last_used_us)
      t->last_used_us = now_us;
    t->hits++;
    return 0;
  }
  if (s->n == s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 256;
    pcd_touch *v = pcache__realloc(s->v, cap * sizeof *v);
    if (!v)
      return -ENOMEM;
    s->v = v;
    s->cap = cap;
  }
  t = &s->v[s->n];
  memcpy(t->key, key, PCD_ENTRY_KEY_SIZE);
  t->last_used_us = now_us;
  t->hits = 1;
  if (pcd_pos_index_add(&s->index, h, s->n, hash_at, s) < 0)
    return -ENOMEM;
  s->n++;
  return 0;
}

void pcd_touch_set_take(pcd_touch_set *s, pcd_touch **ret_touches, size_t *ret_n) {
  *ret_touches = s->n ? s->v : NULL;
  *ret_n = s->n;
  if (!s->n)
    pcache__free(s->v);
  pcd_pos_index_free(&s->index);
  memset(s, 0, sizeof *s);
}

void pcd_touch_set_free(pcd_touch_set *s) {
  pcache__free(s->v);
  pcd_pos_index_free(&s->index);
  memset(s, 0, sizeof *s);
}
