/* Fuzz target: the shared-memory segment checker (proto/segment.c), what
 * stands between another process's bytes and libpcache. Byte 0: bit 0
 * re-signs the table checksum over the input (so that mutations reach the
 * checks behind it), bit 1 takes the device key from the segment's own
 * header. Whatever passes must be safe to walk: every entry in data order
 * and by lookup, every byte of every blob and of the snapshot inside the
 * input (ASan flags any read past it). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/bytes.h"
#include "fuzz.h"
#include "proto/segment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pcache__devkey key;
  pcache__seg seg;
  const char *why = NULL;
  uint8_t *copy;
  uint64_t sum = 0;
  int r, flags;
  if (size < 1)
    return 0;
  flags = data[0];
  data++;
  size--;
  memset(&key, 0x5a, sizeof key);
  copy = malloc(size ? size : 1);
  if (!copy)
    return 0;
  memcpy(copy, data, size);
  if ((flags & 2) && size >= PCACHE_SEG_OFF_DEVKEY + PCACHE_DEVKEY_SIZE)
    memcpy(key.bytes, copy + PCACHE_SEG_OFF_DEVKEY, PCACHE_DEVKEY_SIZE);
  if ((flags & 1) && size >= PCACHE_SEG_HEADER_SIZE) {
    uint64_t n = pcache__le32(copy + PCACHE_SEG_OFF_N_ENTRIES),
             ns = pcache__le32(copy + PCACHE_SEG_OFF_N_SNAP_HASHES);
    uint64_t end = PCACHE_SEG_HEADER_SIZE + n * (PCACHE_SEG_INDEX_ENTRY + 4) + ns * 16;
    if (n <= PCACHE_SEG_MAX_ENTRIES && ns <= PCACHE_SEG_MAX_SNAP_HASHES && end <= size)
      pcache__put_le64(copy + PCACHE_SEG_OFF_TABLE_SUM, pcache__seg_table_checksum(copy, end));
  }
  r = pcache__seg_check(copy, size, &key, &seg, &why);
  CHECK(r == 0 || (r == PCACHE_EPROTO && why && *why));
  if (r == 0) {
    CHECK(seg.n_uncovered <= seg.n_entries);
    for (uint32_t i = 0; i < seg.n_entries; i++) {
      pcache__seg_blob b, f;
      pcache__seg_at(&seg, i, &b);
      CHECK(b.data >= copy && b.offset + b.size <= size);
      CHECK(pcache__seg_find(&seg, b.hash, &f) == 1 && f.data == b.data);
      sum += pcache__checksum64(b.data, b.size);
    }
    if (seg.snapshot)
      sum += pcache__checksum64(seg.snapshot, seg.snapshot_size);
    for (uint32_t i = 0; i < seg.n_snap_hashes; i++)
      sum += seg.snap_hashes[i * 16u + 15];
  }
  free(copy);
  return (int)(sum & 0); /* the reads are the point */
}
