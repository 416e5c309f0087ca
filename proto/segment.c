/* The segment checker (segment.h). Every offset and count comes from
 * bytes another process wrote, so each is checked against the segment's
 * size with arithmetic that cannot wrap before it is used. */
#include "proto/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "proto/frame.h"

uint64_t pcache__seg_table_checksum(const uint8_t *base, uint64_t tables_end) {
  uint64_t head = pcache__checksum64(base, PCACHE_SEG_OFF_TABLE_SUM);
  uint64_t tables = pcache__checksum64(base + PCACHE_SEG_HEADER_SIZE,
                                       (size_t)(tables_end - PCACHE_SEG_HEADER_SIZE));
  return head ^ (tables * 0x9E3779B97F4A7C15ull);
}

static void entry_of(const pcache__seg *seg, uint32_t at, pcache__seg_blob *ret) {
  const uint8_t *e = seg->index + (size_t)at * PCACHE_SEG_INDEX_ENTRY;
  ret->hash = e;
  ret->offset = pcache__le64(e + 16);
  /* Checked segments only point inside; the checker looks at offset. */
  ret->data = ret->offset <= seg->size ? seg->base + ret->offset : NULL;
  ret->size = pcache__le64(e + 24);
  ret->checksum = pcache__le64(e + 32);
  ret->kind = pcache__le32(e + 40);
  ret->flags = pcache__le32(e + 44);
}

/* Whether [off, off + len) lies inside [lo, hi), without wrapping. */
static int inside(uint64_t off, uint64_t len, uint64_t lo, uint64_t hi) {
  return off >= lo && off <= hi && len <= hi - off;
}

#define REFUSE(why_text)                                                                           \
  do {                                                                                             \
    *ret_why = why_text;                                                                           \
    r = PCACHE_EPROTO;                                                                             \
    goto out;                                                                                      \
  } while (0)

/* The order: a permutation of the index, whose blobs follow each other in
 * the data from `from` on, none overlapping the next. */
static int check_order(const pcache__seg *seg, uint64_t from, const char **ret_why) {
  uint8_t *seen = pcache__calloc(seg->n_entries ? seg->n_entries : 1, 1);
  uint64_t end = from;
  int r = 0;
  if (!seen)
    return -ENOMEM;
  for (uint32_t i = 0; i < seg->n_entries; i++) {
    uint32_t at = pcache__le32(seg->order + (size_t)i * 4);
    pcache__seg_blob b;
    if (at >= seg->n_entries || seen[at])
      REFUSE("the order is not a permutation of the index");
    seen[at] = 1;
    entry_of(seg, at, &b);
    if (!inside(b.offset, b.size, end, seg->size))
      REFUSE(b.offset < end ? "two blobs overlap" : "a blob lies outside the segment");
    if ((i < seg->n_uncovered) == !!(b.flags & PCACHE_SEG_COVERED))
      REFUSE("the order does not put uncovered blobs first");
    end = b.offset + b.size;
  }
out:
  pcache__free(seen);
  return r;
}

int pcache__seg_check(const uint8_t *base, uint64_t size, const pcache__devkey *devkey,
                      pcache__seg *ret_seg, const char **ret_why) {
  pcache__seg seg = {.base = base, .size = size};
  uint64_t index_off, order_off, snap_off, data_off, snapshot_off, tables_end;
  int r = 0;

  if (!base || size < PCACHE_SEG_HEADER_SIZE)
    REFUSE("shorter than its header");
  if (memcmp(base + PCACHE_SEG_OFF_MAGIC, PCACHE_SEG_MAGIC, 8) != 0)
    REFUSE("not a segment (bad magic)");
  if (pcache__le32(base + PCACHE_SEG_OFF_VERSION) != PCACHE_SEG_VERSION)
    REFUSE("a segment version this client does not know");
  if (pcache__le32(base + PCACHE_SEG_OFF_HEADER_SIZE) != PCACHE_SEG_HEADER_SIZE)
    REFUSE("a header size this version does not have");
  if (pcache__le64(base + PCACHE_SEG_OFF_SIZE) != size)
    REFUSE("its size is not the memfd's (truncated?)");
  if (memcmp(base + PCACHE_SEG_OFF_DEVKEY, devkey->bytes, PCACHE_DEVKEY_SIZE) != 0)
    REFUSE("made for another device");
  seg.generation = pcache__le64(base + PCACHE_SEG_OFF_GENERATION);
  seg.n_entries = pcache__le32(base + PCACHE_SEG_OFF_N_ENTRIES);
  seg.flags = pcache__le32(base + PCACHE_SEG_OFF_FLAGS);
  seg.n_snap_hashes = pcache__le32(base + PCACHE_SEG_OFF_N_SNAP_HASHES);
  seg.n_uncovered = pcache__le32(base + PCACHE_SEG_OFF_N_UNCOVERED);
  if (seg.n_entries > PCACHE_SEG_MAX_ENTRIES || seg.n_snap_hashes > PCACHE_SEG_MAX_SNAP_HASHES ||
      seg.n_uncovered > seg.n_entries)
    REFUSE("counts out of bounds");
  index_off = pcache__le64(base + PCACHE_SEG_OFF_INDEX);
  order_off = pcache__le64(base + PCACHE_SEG_OFF_ORDER);
  snap_off = pcache__le64(base + PCACHE_SEG_OFF_SNAP_HASHES);
  data_off = pcache__le64(base + PCACHE_SEG_OFF_DATA);
  /* The counts are bounded above, so these sums cannot wrap. */
  tables_end = PCACHE_SEG_HEADER_SIZE + (uint64_t)seg.n_entries * (PCACHE_SEG_INDEX_ENTRY + 4) +
               (uint64_t)seg.n_snap_hashes * PCACHE_HASH_SIZE;
  if (index_off != PCACHE_SEG_HEADER_SIZE ||
      order_off != index_off + (uint64_t)seg.n_entries * PCACHE_SEG_INDEX_ENTRY ||
      snap_off != order_off + (uint64_t)seg.n_entries * 4 || data_off < tables_end ||
      data_off > size)
    REFUSE("its tables are out of bounds");
  if (pcache__seg_table_checksum(base, tables_end) !=
      pcache__le64(base + PCACHE_SEG_OFF_TABLE_SUM))
    REFUSE("its tables fail their checksum");
  seg.index = base + index_off;
  seg.order = base + order_off;
  seg.snap_hashes = base + snap_off;
  for (uint32_t i = 1; i < seg.n_entries; i++)
    if (memcmp(seg.index + (size_t)(i - 1) * PCACHE_SEG_INDEX_ENTRY,
               seg.index + (size_t)i * PCACHE_SEG_INDEX_ENTRY, PCACHE_HASH_SIZE) >= 0)
      REFUSE("its index is not sorted, or names a hash twice");
  snapshot_off = pcache__le64(base + PCACHE_SEG_OFF_SNAPSHOT);
  seg.snapshot_size = pcache__le64(base + PCACHE_SEG_OFF_SNAPSHOT_SIZE);
  seg.snapshot_checksum = pcache__le64(base + PCACHE_SEG_OFF_SNAPSHOT_SUM);
  if (seg.snapshot_size && !inside(snapshot_off, seg.snapshot_size, data_off, size))
    REFUSE("its snapshot lies outside the segment");
  if (seg.snapshot_size)
    seg.snapshot = base + snapshot_off;
  r = check_order(&seg, seg.snapshot_size ? snapshot_off + seg.snapshot_size : data_off, ret_why);
  if (r == 0)
    *ret_seg = seg;
out:
  return r;
}

#undef REFUSE

int pcache__seg_find(const pcache__seg *seg, const uint8_t hash[PCACHE_HASH_SIZE],
                     pcache__seg_blob *ret_blob) {
  uint32_t lo = 0, hi = seg->n_entries;
  while (lo < hi) {
    uint32_t mid = lo + (hi - lo) / 2;
    int c = memcmp(seg->index + (size_t)mid * PCACHE_SEG_INDEX_ENTRY, hash, PCACHE_HASH_SIZE);
    if (c == 0) {
      entry_of(seg, mid, ret_blob);
      return 1;
    }
    if (c < 0)
      lo = mid + 1;
    else
      hi = mid;
  }
  return 0;
}

void pcache__seg_at(const pcache__seg *seg, uint32_t i, pcache__seg_blob *ret_blob) {
  entry_of(seg, pcache__le32(seg->order + (size_t)i * 4), ret_blob);
}

int pcache__seg_map_open(int fd, uint64_t size, const pcache__devkey *devkey, int populate,
                         pcache__seg_map *ret, const char **ret_why) {
  void *map;
  int r;
  /* Unsealed, its writer could change a checked byte under us. */
  if ((r = pcache__memfd_check(fd, F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW, size, 1, ret_why)) <
      0)
    return r;
  map = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
  if (map == MAP_FAILED)
    return -errno;
  r = pcache__seg_check(map, size, devkey, &ret->seg, ret_why);
  if (r < 0) {
    munmap(map, (size_t)size);
    return r;
  }
  ret->map = map;
  ret->map_size = (size_t)size;
  ret->lease_fd = -1;
  return 0;
}

void pcache__seg_map_close(pcache__seg_map *m) {
  if (!m || !m->map)
    return;
  munmap(m->map, m->map_size);
  if (m->lease_fd >= 0)
    close(m->lease_fd);
  memset(m, 0, sizeof *m);
}
