/* What every part of pcached shares: the configuration, the counters that
 * Stats reports, and the pending last-used/hit batch. */
#ifndef PCD_DAEMON_H
#define PCD_DAEMON_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/clock.h"
#include "config.h"
#include "store.h"

typedef struct pcd_stats {
  atomic_uint_fast64_t requests, gets, hits, misses, puts, put_rejected, evictions, commits,
      checksum_failures, reports;
  /* Connections parked: their client asked again before taking its reply
   * memfd (connection.c). */
  atomic_uint_fast64_t parked;
  /* Prefetch pages that collected and sorted the (device, app) entries;
   * the others went on with their connection's cursor (read_blobs.c). */
  atomic_uint_fast64_t prefetch_scans;
  /* Reply windows (window.h): open and their bytes (connection.c), and
   * replies that went through one or found it busy (read_blobs.c). */
  atomic_uint_fast64_t windows, window_bytes, window_replies, window_busy;
  /* The fleet tier (remote*.c; StatsReply.remote says what each is). */
  atomic_uint_fast64_t fleet_asks, fleet_fetched, fleet_stored, fleet_refused, fleet_timeouts,
      fleet_skipped, fleet_pushed, fleet_push_dropped, fleet_push_errors, fleet_reconnects,
      fleet_refused_unsigned, fleet_refused_untrusted, fleet_refused_signature;
  /* Why writes last did not fit (pcd_full; writer.c), for Stats. */
  atomic_int full;
} pcd_stats;

/* pcd_stats.full: the last write that needed room got it (NONE), or the
 * file system holding data.mdb was full (DISK: the file cannot grow), or
 * the map was full with nothing left to evict (STORE). */
typedef enum pcd_full { PCD_FULL_NONE, PCD_FULL_DISK, PCD_FULL_STORE } pcd_full;

/* A Get/Prefetch hit waiting to be written (every flush interval). */
typedef struct pcd_touch {
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  uint64_t last_used_us;
  uint64_t hits;
} pcd_touch;

/* Real time, for what is stored (created, last used). Timeouts use
 * pcache__mono_us (common/clock.h). */
static inline uint64_t pcd_now_us(void) { return pcache__real_us(); }

/* A libuv result as pcache's error convention, so that no UV_* code leaves
 * a daemon function: on Unix libuv reports a system error as -errno
 * (UV__ERR), but its own codes (UV_EOF, UV_EAI_*, UV_ECHARSET, ...: all
 * at or below -3000) are no errno, and become -EIO. */
static inline int pcd_uv_err(int r) { return r <= -3000 ? -EIO : r; }

/* A request that moved at least this much through malloc (a big reply, a
 * large touch batch) is followed by a trim (pcd_server_trim). */
#define PCD_TRIM_BYTES (4u << 20)

#endif
