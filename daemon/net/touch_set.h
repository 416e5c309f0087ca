/* Pending last-used/hit records of one I/O thread, one per entry: a Get
 * or Prefetch that names an entry many times, or many Gets of one entry
 * within a flush interval, record one touch whose hits add up. Without
 * this, a read-only client naming one entry 4096 times per Get queued
 * 16.5 M records (1 GiB of heap) in 6 s (issue 12). */
#ifndef PCD_TOUCH_SET_H
#define PCD_TOUCH_SET_H

#include <stddef.h>
#include <stdint.h>

#include "daemon.h"
#include "pos_index.h"

/* Distinct entries a set holds before its owner must hand it to the
 * writer: 64 Ki touches are 4.5 MiB with the index. */
#define PCD_TOUCH_SET_MAX 65536

typedef struct pcd_touch_set {
  pcd_touch *v; /* in first-touch order */
  size_t n, cap;
  pcd_pos_index index; /* entry key -> position in v */
} pcd_touch_set;

/* Records a hit on key at now_us: merged into the entry's pending touch
 * (latest time, hits added) or appended. Returns 0, or -ENOMEM (the hit
 * is lost: the entry only ages a little sooner). */
int pcd_touch_set_add(pcd_touch_set *set, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t now_us);
/* Hands the touches to the caller (pcache__free them) and empties the
 * set; *ret_touches is NULL when there were none. */
void pcd_touch_set_take(pcd_touch_set *set, pcd_touch **ret_touches, size_t *ret_n);
void pcd_touch_set_free(pcd_touch_set *set);

#endif
