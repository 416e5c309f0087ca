/* The shared-memory segment format (docs/storage.md "Segments"): what
 * pcached lays out once per (device, app) in a sealed memfd and every
 * client of that app maps read-only. pcached writes it
 * (daemon/reads/segment_build.c); clients check it here before they trust a
 * byte of it (client/segment.c).
 *
 * All integers little-endian; offsets are from the segment's first byte.
 *
 *   header      PCACHE_SEG_HEADER_SIZE bytes (fields below)
 *   index       n_entries x 48 bytes, sorted by state hash, each hash once:
 *               hash[16], u64 offset, u64 size, u64 XXH3-64 of the blob,
 *               u32 kind, u32 flags (PCACHE_SEG_COVERED: the snapshot holds it)
 *   order       n_entries x u32: index positions in the order their blobs
 *               lie in the data (the app's prefetch order: the first
 *               n_uncovered are the ones the snapshot does not hold)
 *   snap hashes n_snap_hashes x 16 bytes: what the snapshot covers
 *   data        the snapshot's blob, then every blob in `order`, no overlaps
 *
 * The tables follow each other with no gap, from the end of the header. *
 * table_checksum is XXH3-64 of the header before it, the index, the order
 * and the snapshot hashes; blobs carry their own checksums (checked when a
 * blob is used, as for the socket's), and so does the snapshot. */
#ifndef PCACHE_PROTO_SEGMENT_H
#define PCACHE_PROTO_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"

#define PCACHE_SEG_MAGIC "PCSEGMT"  /* 8 bytes with its terminator */
#define PCACHE_SEG_VERSION 1u
#define PCACHE_SEG_HEADER_SIZE 144u
#define PCACHE_SEG_INDEX_ENTRY 48u
/* More than any store holds for one app (--prefetch-max is at most 2^24,
 * but a segment is bounded by its bytes long before): a sanity bound so a
 * forged count cannot make the checker allocate much. */
#define PCACHE_SEG_MAX_ENTRIES (1u << 22)
#define PCACHE_SEG_MAX_SNAP_HASHES (1u << 16)
/* The largest segment pcached makes, and a client maps: eight times the
 * default --segment-memory, so that a forged size cannot make a client
 * map (and check the tables of) more. */
#define PCACHE_SEG_MAX_SIZE (4ull << 30)

/* Header flags. */
#define PCACHE_SEG_COMPLETE 1u /* holds every entry the app's Prefetch would send */
/* Index entry flags. */
#define PCACHE_SEG_COVERED 1u /* the snapshot holds this pipeline */

/* Header field offsets. */
enum {
  PCACHE_SEG_OFF_MAGIC = 0,
  PCACHE_SEG_OFF_VERSION = 8,
  PCACHE_SEG_OFF_HEADER_SIZE = 12,
  PCACHE_SEG_OFF_SIZE = 16,
  PCACHE_SEG_OFF_DEVKEY = 24,
  PCACHE_SEG_OFF_GENERATION = 56,
  PCACHE_SEG_OFF_N_ENTRIES = 64,
  PCACHE_SEG_OFF_FLAGS = 68,
  PCACHE_SEG_OFF_INDEX = 72,
  PCACHE_SEG_OFF_ORDER = 80,
  PCACHE_SEG_OFF_SNAP_HASHES = 88,
  PCACHE_SEG_OFF_N_SNAP_HASHES = 96,
  PCACHE_SEG_OFF_N_UNCOVERED = 100,
  PCACHE_SEG_OFF_SNAPSHOT = 104,
  PCACHE_SEG_OFF_SNAPSHOT_SIZE = 112,
  PCACHE_SEG_OFF_SNAPSHOT_SUM = 120,
  PCACHE_SEG_OFF_DATA = 128,
  PCACHE_SEG_OFF_TABLE_SUM = 136,
};

/* A checked segment: what its header says, and where its tables are. */
typedef struct pcache__seg {
  const uint8_t *base;
  uint64_t size, generation;
  uint32_t n_entries, flags, n_snap_hashes, n_uncovered;
  const uint8_t *index, *order, *snap_hashes;
  const uint8_t *snapshot; /* NULL: none */
  uint64_t snapshot_size, snapshot_checksum;
} pcache__seg;

/* One blob of a segment. */
typedef struct pcache__seg_blob {
  const uint8_t *hash; /* 16 bytes */
  const uint8_t *data;
  uint64_t offset, size, checksum;
  uint32_t kind, flags;
} pcache__seg_blob;

/*
 * pcache__seg_check - checks the size bytes at base as a segment made for
 * devkey: magic, version, sizes, every table inside the segment and apart
 * from the others, the table checksum, the index sorted with each hash
 * once, the order a permutation of the index whose blobs lie inside the
 * data, in order, without overlapping each other or the snapshot. Blob
 * bytes are not read (their checksums are checked when used). Returns 0
 * with *ret_seg, or PCACHE_EPROTO with why (a static string) saying what
 * was wrong. Reads nothing outside [base, base + size).
 */
int pcache__seg_check(const uint8_t *base, uint64_t size, const pcache__devkey *devkey,
                      pcache__seg *ret_seg, const char **ret_why);

/* The blob of hash in a checked segment: 1 and *ret_blob, or 0. */
int pcache__seg_find(const pcache__seg *seg, const uint8_t hash[PCACHE_HASH_SIZE],
                     pcache__seg_blob *ret_blob);

/* The i-th blob (i < n_entries) in data order (order[i]). */
void pcache__seg_at(const pcache__seg *seg, uint32_t i, pcache__seg_blob *ret_blob);

/* A segment mapped read-only from the memfd a SegmentReply brought. */
typedef struct pcache__seg_map {
  pcache__seg seg;
  void *map;
  size_t map_size;
  /* The daemon's lease (Segment.lease), held while mapped; -1: none. The
   * caller sets it after pcache__seg_map_open. */
  int lease_fd;
} pcache__seg_map;

/*
 * pcache__seg_map_open - checks that fd is a memfd sealed against writes,
 * growing and shrinking, of exactly size bytes, maps it read-only
 * (populated when populate is set: every page is about to be read) and
 * checks the mapping (pcache__seg_check). fd stays the caller's: the
 * mapping outlives it. Returns 0 with *ret, -ENOMEM / -errno, or
 * PCACHE_EPROTO with why.
 */
int pcache__seg_map_open(int fd, uint64_t size, const pcache__devkey *devkey, int populate,
                         pcache__seg_map *ret, const char **ret_why);
/* Unmaps, then closes the lease: the daemon must not count the segment
 * gone while it is still mapped. (A zeroed one too: lease_fd 0 is taken
 * for none only when nothing is mapped.) */
void pcache__seg_map_close(pcache__seg_map *m);

/* The table checksum of a segment whose tables end at tables_end (the
 * header less its last field, then everything from the index to the end
 * of the snapshot hashes): the writer's and the checker's one definition. */
uint64_t pcache__seg_table_checksum(const uint8_t *base, uint64_t tables_end);

#endif
