/* Building a shared-memory segment (the layout is proto/segment.h's):
 * choosing what it holds from the store, laying out its tables, and
 * writing it into a sealed memfd. Its own file, beside the registry
 * (segment.c) that decides when to build and holds what was built: this
 * part reads the store and writes bytes, and knows nothing of leases,
 * limits or threads. */
#include "segment_build.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "app_order.h"
#include "bulk.h"
#include "common/alloc.h"
#include "common/bytes.h"
#include "proto/segment.h"

/* One blob chosen for the segment. */
typedef struct seg_item {
  uint8_t hash[PCACHE_HASH_SIZE];
  const uint8_t *blob; /* in the read transaction's map */
  uint64_t offset, size, checksum;
  uint32_t kind, flags, order; /* order: its position in the data */
} seg_item;

static int by_hash(const void *a, const void *b) { return memcmp(a, b, PCACHE_HASH_SIZE); }

static int item_by_hash(const void *a, const void *b) {
  return memcmp(((const seg_item *)a)->hash, ((const seg_item *)b)->hash, PCACHE_HASH_SIZE);
}

/* The snapshot, when it is sound: its blob, and the hashes it covers that
 * still have an entry (of any app, as a Prefetch reports them), sorted. A
 * snapshot that fails its checksum is left out (a Prefetch drops it). */
static int plan_snapshot(pcd_txn *txn, const uint8_t *devkey, const char *app, pcd_seg_plan *p) {
  pcd_snapshot meta;
  const uint8_t *hashes, *blob;
  if (pcd_snapshot_get(txn, devkey, app, &meta, &hashes, &blob) < 0 ||
      meta.n_hashes > PCACHE_SEG_MAX_SNAP_HASHES ||
      pcache__checksum64(blob, meta.blob_size) != meta.checksum)
    return 0;
  p->snap_hashes = pcache__malloc(meta.n_hashes ? meta.n_hashes * PCACHE_HASH_SIZE : 1);
  if (!p->snap_hashes)
    return -ENOMEM;
  for (uint64_t i = 0; i < meta.n_hashes; i++) {
    uint8_t key[PCD_ENTRY_KEY_SIZE];
    pcd_entry e;
    memcpy(key, devkey, PCACHE_DEVKEY_SIZE);
    memcpy(key + PCACHE_DEVKEY_SIZE, hashes + i * PCACHE_HASH_SIZE, PCACHE_HASH_SIZE);
    if (pcd_entry_get(txn, key, &e) == 0)
      memcpy(p->snap_hashes + (size_t)p->n_snap++ * PCACHE_HASH_SIZE, key + PCACHE_DEVKEY_SIZE,
             PCACHE_HASH_SIZE);
  }
  if (p->n_snap)
    qsort(p->snap_hashes, p->n_snap, PCACHE_HASH_SIZE, by_hash);
  p->snapshot = blob;
  p->snapshot_size = meta.blob_size;
  p->snapshot_checksum = meta.checksum;
  return 0;
}

/* Adds ref's blob to the plan if it is sound and fits in *io_room. */
static void plan_blob(pcd_txn *txn, const pcd_order_ref *ref, uint32_t flags, pcd_seg_plan *p,
                      uint64_t *io_room) {
  const uint8_t *blob;
  size_t size;
  seg_item *it;
  if (ref->blob_size > *io_room) {
    p->complete = 0;
    return;
  }
  /* As a Get would: a blob that is missing or fails its checksum is never
   * handed out (the socket path drops it when it is next asked for). */
  if (pcd_blob_get(txn, ref->key, &blob, &size) < 0)
    return;
  if (size != ref->blob_size || pcache__checksum64(blob, size) != ref->checksum) {
    uint8_t *k = pcache__realloc(p->bad_keys, (p->n_bad + 1) * PCD_ENTRY_KEY_SIZE);
    if (k) {
      memcpy(k + p->n_bad++ * PCD_ENTRY_KEY_SIZE, ref->key, PCD_ENTRY_KEY_SIZE);
      p->bad_keys = k;
    }
    return;
  }
  it = &p->items[p->n++];
  memcpy(it->hash, ref->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  it->blob = blob;
  it->size = size;
  it->checksum = ref->checksum;
  it->kind = ref->kind;
  it->flags = flags;
  it->order = (uint32_t)(p->n - 1);
  *io_room -= size;
}

int pcd_segment_plan(pcd_txn *txn, const pcd_config *cfg, const uint8_t *devkey, const char *app,
                     uint64_t cap, pcd_seg_plan *p) {
  pcd_order_vec ev = {0};
  uint64_t newest = 0, room;
  size_t n;
  int r = pcd_order_collect(txn, devkey, app, &ev, &newest);
  if (r < 0)
    goto out;
  pcd_order_sort(&ev);
  n = pcd_order_likely(&ev, newest, cfg);
  if (n > PCACHE_SEG_MAX_ENTRIES)
    n = PCACHE_SEG_MAX_ENTRIES;
  if ((r = plan_snapshot(txn, devkey, app, p)) < 0)
    goto out;
  p->items = pcache__malloc((n ? n : 1) * sizeof *p->items);
  if (!p->items) {
    r = -ENOMEM;
    goto out;
  }
  p->complete = 1;
  room = PCACHE_SEG_HEADER_SIZE + (uint64_t)n * (PCACHE_SEG_INDEX_ENTRY + 4) +
         (uint64_t)p->n_snap * PCACHE_HASH_SIZE + p->snapshot_size;
  room = room < cap ? cap - room : 0;
  for (int pass = 0; pass < 2; pass++) {
    for (size_t i = 0; i < n; i++) {
      const uint8_t *h = ev.items[i].key + PCACHE_DEVKEY_SIZE;
      int covered = p->n_snap && bsearch(h, p->snap_hashes, p->n_snap, PCACHE_HASH_SIZE, by_hash);
      if (covered == pass)
        plan_blob(txn, &ev.items[i], covered ? PCACHE_SEG_COVERED : 0, p, &room);
    }
    if (pass == 0)
      p->n_uncovered = p->n;
  }
out:
  pcache_vec_free(&ev);
  return r;
}

void pcd_segment_plan_free(pcd_seg_plan *p) {
  pcache__free(p->items);
  pcache__free(p->snap_hashes);
  pcache__free(p->bad_keys);
}

/* Lays the plan out (offsets, header, tables) in a buffer of the tables'
 * size (*ret_tables bytes); *ret_size is the whole segment's. */
static uint8_t *lay_out(pcd_seg_plan *p, const uint8_t *devkey, uint64_t generation,
                        uint64_t *ret_tables, uint64_t *ret_size) {
  uint64_t index_off = PCACHE_SEG_HEADER_SIZE,
           order_off = index_off + (uint64_t)p->n * PCACHE_SEG_INDEX_ENTRY,
           snap_off = order_off + (uint64_t)p->n * 4,
           tables = snap_off + (uint64_t)p->n_snap * PCACHE_HASH_SIZE, at = tables;
  uint8_t *b = pcache__calloc(1, tables);
  if (!b)
    return NULL;
  at += p->snapshot_size;
  for (size_t i = 0; i < p->n; i++) {
    p->items[i].offset = at;
    at += p->items[i].size;
  }
  memcpy(b + PCACHE_SEG_OFF_MAGIC, PCACHE_SEG_MAGIC, 8);
  pcache__put_le32(b + PCACHE_SEG_OFF_VERSION, PCACHE_SEG_VERSION);
  pcache__put_le32(b + PCACHE_SEG_OFF_HEADER_SIZE, PCACHE_SEG_HEADER_SIZE);
  pcache__put_le64(b + PCACHE_SEG_OFF_SIZE, at);
  memcpy(b + PCACHE_SEG_OFF_DEVKEY, devkey, PCACHE_DEVKEY_SIZE);
  pcache__put_le64(b + PCACHE_SEG_OFF_GENERATION, generation);
  pcache__put_le32(b + PCACHE_SEG_OFF_N_ENTRIES, (uint32_t)p->n);
  pcache__put_le32(b + PCACHE_SEG_OFF_FLAGS, p->complete ? PCACHE_SEG_COMPLETE : 0);
  pcache__put_le64(b + PCACHE_SEG_OFF_INDEX, index_off);
  pcache__put_le64(b + PCACHE_SEG_OFF_ORDER, order_off);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAP_HASHES, snap_off);
  pcache__put_le32(b + PCACHE_SEG_OFF_N_SNAP_HASHES, p->n_snap);
  pcache__put_le32(b + PCACHE_SEG_OFF_N_UNCOVERED, (uint32_t)p->n_uncovered);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAPSHOT, tables);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAPSHOT_SIZE, p->snapshot_size);
  pcache__put_le64(b + PCACHE_SEG_OFF_SNAPSHOT_SUM, p->snapshot_checksum);
  pcache__put_le64(b + PCACHE_SEG_OFF_DATA, tables);
  /* The index is sorted by hash; the order says where each one lies. */
  for (size_t i = 0; i < p->n; i++)
    p->items[i].order = (uint32_t)i;
  qsort(p->items, p->n, sizeof *p->items, item_by_hash);
  for (size_t i = 0; i < p->n; i++) {
    uint8_t *e = b + index_off + i * PCACHE_SEG_INDEX_ENTRY;
    memcpy(e, p->items[i].hash, PCACHE_HASH_SIZE);
    pcache__put_le64(e + 16, p->items[i].offset);
    pcache__put_le64(e + 24, p->items[i].size);
    pcache__put_le64(e + 32, p->items[i].checksum);
    pcache__put_le32(e + 40, p->items[i].kind);
    pcache__put_le32(e + 44, p->items[i].flags);
    pcache__put_le32(b + order_off + (uint64_t)p->items[i].order * 4, (uint32_t)i);
  }
  if (p->n_snap)
    memcpy(b + snap_off, p->snap_hashes, (size_t)p->n_snap * PCACHE_HASH_SIZE);
  pcache__put_le64(b + PCACHE_SEG_OFF_TABLE_SUM, pcache__seg_table_checksum(b, tables));
  *ret_tables = tables;
  *ret_size = at;
  return b;
}

/* Writes the tables, the snapshot and the blobs (straight from the
 * store's map, in data order) into a new memfd and seals it. */
static int write_segment(const pcd_seg_plan *p, const uint8_t *tables, uint64_t tables_size,
                         uint64_t size, int *ret_fd) {
  enum { BATCH = 1024 }; /* IOV_MAX on Linux */
  struct iovec iov[BATCH];
  uint64_t off = 0;
  seg_item **by_order = NULL;
  int fd = memfd_create("pcache-segment", MFD_ALLOW_SEALING | MFD_CLOEXEC), n = 0, r;
  if (fd < 0)
    return -errno;
  /* Sized first: the pages are allocated as they are written either way,
   * but a reader of a half-written file would see its true length. */
  if (ftruncate(fd, (off_t)size) < 0) {
    r = -errno;
    goto out;
  }
  by_order = pcache__malloc((p->n ? p->n : 1) * sizeof *by_order);
  if (!by_order) {
    r = -ENOMEM;
    goto out;
  }
  /* The items are in index order now; `order` is each one's place. */
  for (size_t i = 0; i < p->n; i++)
    by_order[p->items[i].order] = &p->items[i];
  iov[n++] = (struct iovec){(void *)tables, tables_size};
  if (p->snapshot_size)
    iov[n++] = (struct iovec){(void *)p->snapshot, p->snapshot_size};
  r = 0;
  for (size_t i = 0; i < p->n && r == 0; i++) {
    const seg_item *it = by_order[i];
    if (it->size)
      iov[n++] = (struct iovec){(void *)it->blob, it->size};
    if (n == BATCH) {
      r = pcd_write_iov(fd, iov, n, &off);
      n = 0;
    }
  }
  if (r == 0 && n)
    r = pcd_write_iov(fd, iov, n, &off);
  if (r == 0 && off != size)
    r = -EIO;
  if (r == 0 &&
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    r = -errno;
out:
  pcache__free(by_order);
  if (r < 0) {
    close(fd);
    return r;
  }
  *ret_fd = fd;
  return 0;
}

int pcd_segment_write(pcd_seg_plan *p, const uint8_t *devkey, uint64_t generation, int *ret_fd,
                      uint64_t *ret_size) {
  uint64_t tables_size = 0, size = 0;
  uint8_t *tables = lay_out(p, devkey, generation, &tables_size, &size);
  int r = tables ? write_segment(p, tables, tables_size, size, ret_fd) : -ENOMEM;
  pcache__free(tables);
  if (r == 0)
    *ret_size = size;
  return r;
}
