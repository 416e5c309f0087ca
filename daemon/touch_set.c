#include "touch_set.h"

#include <errno.h>
#include <string.h>

#include "common/alloc.h"
#include "common/bytes.h"

/* Entry keys end in a state hash (XXH3-128 of the description): its bytes
 * are already well mixed. */
static size_t slot_of(const uint8_t key[PCD_ENTRY_KEY_SIZE], size_t n_slots) {
  uint64_t h = pcache__le64(key + PCACHE_DEVKEY_SIZE) ^ pcache__le64(key);
  return (size_t)(h * 0x9e3779b97f4a7c15ull >> 32) & (n_slots - 1);
}

static int grow(pcd_touch_set *s) {
  size_t cap = s->cap ? s->cap * 2 : 256, n_slots = cap * 2;
  pcd_touch *v = pcache__realloc(s->v, cap * sizeof *v);
  uint32_t *slots;
  if (!v)
    return -ENOMEM;
  s->v = v;
  slots = pcache__calloc(n_slots, sizeof *slots);
  if (!slots)
    return -ENOMEM;
  for (size_t i = 0; i < s->n; i++) {
    size_t j = slot_of(s->v[i].key, n_slots);
    while (slots[j])
      j = (j + 1) & (n_slots - 1);
    slots[j] = (uint32_t)i + 1;
  }
  pcache__free(s->slots);
  s->slots = slots;
  s->n_slots = n_slots;
  s->cap = cap;
  return 0;
}

int pcd_touch_set_add(pcd_touch_set *s, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t now_us) {
  size_t j;
  pcd_touch *t;
  if (s->n_slots) {
    for (j = slot_of(key, s->n_slots); s->slots[j]; j = (j + 1) & (s->n_slots - 1)) {
      t = &s->v[s->slots[j] - 1];
      if (memcmp(t->key, key, PCD_ENTRY_KEY_SIZE) == 0) {
        if (now_us > t->last_used_us)
          t->last_used_us = now_us;
        t->hits++;
        return 0;
      }
    }
  }
  if (s->n == s->cap && grow(s) < 0)
    return -ENOMEM;
  for (j = slot_of(key, s->n_slots); s->slots[j]; j = (j + 1) & (s->n_slots - 1))
    ;
  t = &s->v[s->n];
  memcpy(t->key, key, PCD_ENTRY_KEY_SIZE);
  t->last_used_us = now_us;
  t->hits = 1;
  s->slots[j] = (uint32_t)++s->n;
  return 0;
}

void pcd_touch_set_take(pcd_touch_set *s, pcd_touch **ret_touches, size_t *ret_n) {
  *ret_touches = s->n ? s->v : NULL;
  *ret_n = s->n;
  if (!s->n)
    pcache__free(s->v);
  pcache__free(s->slots);
  memset(s, 0, sizeof *s);
}

void pcd_touch_set_free(pcd_touch_set *s) {
  pcache__free(s->v);
  pcache__free(s->slots);
  memset(s, 0, sizeof *s);
}
