/* The LMDB store (docs/storage.md). Only its own files (store*.c, listed
 * in store_internal.h) include lmdb.h: everything else sees transactions
 * as pcd_txn and records as the plain structs below. Read transactions
 * may be used from any thread (MDB_NOTLS); write transactions belong to
 * the writer thread. */
#ifndef PCD_STORE_H
#define PCD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "proto/pcache.pb-c.h"

/* Entry key: device key ‖ state hash. */
#define PCD_ENTRY_KEY_SIZE (PCACHE_DEVKEY_SIZE + PCACHE_HASH_SIZE)
/* Longest app name stored (LMDB keys are at most 511 bytes). */
#define PCD_MAX_APP 200
/* Longest device name, driver name or driver info a device record keeps
 * (Vulkan's own limit, VK_MAX_*_SIZE less the terminator); longer client
 * strings are cut. */
#define PCD_MAX_DEVICE_STRING 255
/* The most a device record counts against --max-size: its key, the
 * 40-byte header and a DeviceInfo of the key, two integers, three such
 * strings and the deviceUUID (a two-byte tag, its length, 16 bytes). */
#define PCD_DEVICE_COST_MAX                                                                        \
  (2 * PCACHE_DEVKEY_SIZE + 40 + 3 * (PCD_MAX_DEVICE_STRING + 3) + 16 + 3 + PCACHE_UUID_SIZE)
/* The on-disk format this build writes (info "format"). */
#define PCD_STORE_FORMAT 1

typedef struct pcd_store pcd_store;
typedef struct pcd_txn pcd_txn;

typedef struct pcd_entry {
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  uint32_t kind;
  uint64_t blob_size, desc_size, checksum;
  uint64_t created_us, last_used_us, hits, compile_ns;
  char app[PCD_MAX_APP + 1];
} pcd_entry;

typedef struct pcd_device {
  uint8_t key[PCACHE_DEVKEY_SIZE];
  uint64_t first_seen, last_seen; /* unix seconds */
  uint64_t entries, bytes;
  const uint8_t *info; /* packed DeviceInfo, valid during the txn */
  size_t info_size;
} pcd_device;

typedef struct pcd_totals {
  uint64_t entries, devices, modules, map_size;
  /* What counts against --max-size besides snapshots: entries' blobs and
   * descriptions, SPIR-V modules (key, count and code, once however many
   * entries name them) and device records (key and record). */
  uint64_t bytes; /* entry_bytes + module_bytes + device_bytes + index_bytes */
  uint64_t entry_bytes, module_bytes, device_bytes;
  /* The records that find entries and snapshots: each entry's metadata,
   * LRU and app-index records, each snapshot's metadata and keys (key and
   * value bytes; an app name is in three of them). */
  uint64_t index_bytes;
  uint64_t snapshots, snapshot_bytes; /* counted in the size cap with bytes */
} pcd_totals;

/* The index bytes (pcd_totals.index_bytes) an entry filed under an app
 * name of app_len bytes costs. */
uint64_t pcd_entry_index_cost(size_t app_len);

/* A (device, app) snapshot's metadata (docs/storage.md "Snapshots"). */
typedef struct pcd_snapshot {
  uint8_t device_key[PCACHE_DEVKEY_SIZE];
  char app[PCD_MAX_APP + 1];
  uint64_t blob_size, n_hashes, checksum, created_us;
} pcd_snapshot;

/* The one definition of an entry's size, which status, list, purge,
 * export and the cap all use (docs/storage.md "Sizes"): its blob, its
 * description and its own index records (entries, lru, apps). Modules
 * are shared between entries and counted apart. */
uint64_t pcd_entry_size(const pcd_entry *e);
/* The bytes of every snapshot's records (their part of index_bytes), so
 * that Stats can split the cap's total into entries and snapshots. */
int pcd_snapshots_record_bytes(pcd_txn *txn, uint64_t *ret_bytes);

/*
 * pcd_store_open - opens (creating if needed) the store in dir (made 0700;
 * refused unless it is ours and no one else may write to it: -EPERM).
 * A store that fails the start-up walk (pcd_store_check), that LMDB cannot
 * open, or whose format is unknown, is moved aside as
 * data.mdb.corrupt-<unixtime> and a fresh one is made; so is a data.mdb
 * that is a link, not a regular file, or another user's.
 * map_size is the LMDB map size (bytes). The directory's pcached.lock is
 * flocked until pcd_store_close: -EBUSY (logged, naming the other pid)
 * while another daemon holds it.
 * Returns 0, -errno or PCACHE_ESTORE.
 */
int pcd_store_open(const char *dir, uint64_t map_size, pcd_store **ret_store);
/* Counts the bytes of modules and device records (what --max-size counts
 * besides entries) when the store has no count of them yet: one written
 * before they were counted. Returns 0, PCACHE_EFULL or PCACHE_ESTORE. */
int pcd_store_count_sizes(pcd_store *store);
/* A size counter in `info` that is not the sum of the records it counts. */
typedef struct pcd_counter_drift {
  const char *counter; /* "bytes", "module_bytes", ... (static) */
  uint64_t stored, summed;
} pcd_counter_drift;
/* Sums each size counter's records (docs/storage.md "Databases") and
 * compares: the first cap drifts go to ret_drift, *ret_n says how many
 * there were. repair (write txn) sets each drifted counter to its sum.
 * Returns 0 or PCACHE_E*. */
int pcd_counters_check(pcd_txn *txn, pcd_counter_drift *ret_drift, size_t cap, size_t *ret_n,
                       int repair);
/* Commits a transaction that changes nothing but its id: LMDB reuses the
 * pages a commit freed only two commits later, so in a full map this is
 * what lets the next delete find pages. Returns 0 or PCACHE_E*. */
int pcd_store_nudge(pcd_store *store);
void pcd_store_close(pcd_store *store);

/*
 * pcd_store_check - walks the committed store in a child process (page
 * structure, every record, overflow page headers; store_check.h), the
 * check made at every start. Call it on the writer thread (txn is its
 * write transaction), so nothing commits meanwhile. Returns 0 (sound),
 * 1 (damaged: why says how; the next start moves the store aside) or
 * -errno (could not check).
 */
int pcd_store_check(pcd_txn *txn, char *why, size_t why_size);

/*
 * pcd_store_app_gen - a number that changes after every commit that
 * changed (device_key, app)'s entries or snapshot (and sometimes after
 * others'). Read it before the read transaction that copies the pair's
 * data: if it is the same later, no commit since has changed that data.
 * Any thread.
 */
uint64_t pcd_store_app_gen(pcd_store *store, const uint8_t device_key[PCACHE_DEVKEY_SIZE],
                           const char *app);

/* Whether the file system holding data.mdb has less than 1 MiB left to
 * the daemon. */
int pcd_store_disk_low(const pcd_store *store);
int pcd_txn_begin(pcd_store *store, int write, pcd_txn **ret_txn);
/* Returns 0, PCACHE_EFULL (map full), -ENOSPC (the file system holding
 * data.mdb is full: it cannot grow) or PCACHE_ESTORE; the txn is gone. */
int pcd_txn_commit(pcd_txn *txn);
void pcd_txn_abort(pcd_txn *txn);

/* Reads. Pointers into the store are valid until the txn ends. Return 0,
 * PCACHE_ENOT_FOUND or PCACHE_ESTORE. */
int pcd_entry_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], pcd_entry *ret_entry);
int pcd_blob_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], const uint8_t **ret_blob,
                 size_t *ret_size);
int pcd_desc_get(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], const uint8_t **ret_desc,
                 size_t *ret_size);
int pcd_module_get(pcd_txn *txn, const pcache__hash *hash, const uint8_t **ret_code,
                   size_t *ret_size);
int pcd_device_get(pcd_txn *txn, const uint8_t key[PCACHE_DEVKEY_SIZE], pcd_device *ret_device);
int pcd_totals_get(pcd_txn *txn, pcd_totals *ret_totals);

/* Iteration. A callback returning nonzero stops with that value; it must
 * not write through the same txn unless stated. */
typedef int (*pcd_entry_cb)(void *ctx, const pcd_entry *entry);
/* Every entry, or those of one device (device_key may be NULL). */
int pcd_entries_foreach(pcd_txn *txn, const uint8_t *device_key, pcd_entry_cb cb, void *ctx);
/* The same, from the first entry whose key is after after_key: a walk
 * taken up again in a later transaction (Export's slices). */
int pcd_entries_after(pcd_txn *txn, const uint8_t *device_key,
                      const uint8_t after_key[PCD_ENTRY_KEY_SIZE], pcd_entry_cb cb, void *ctx);
/* The entries filed under app on a device, through the apps index. */
int pcd_app_foreach(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE], const char *app,
                    pcd_entry_cb cb, void *ctx);
typedef int (*pcd_device_cb)(void *ctx, const pcd_device *device);
int pcd_devices_foreach(pcd_txn *txn, pcd_device_cb cb, void *ctx);
typedef int (*pcd_module_cb)(void *ctx, const pcache__hash *hash, const uint8_t *code, size_t size);
int pcd_modules_foreach(pcd_txn *txn, pcd_module_cb cb, void *ctx);
/*
 * pcd_snapshot_get - the snapshot of (device_key, app). ret_hashes (n_hashes
 * × 16 bytes) and ret_blob may be NULL; they point into the store. Returns
 * 0, PCACHE_ENOT_FOUND or PCACHE_ESTORE (a record that does not decode).
 */
int pcd_snapshot_get(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE], const char *app,
                     pcd_snapshot *ret_snapshot, const uint8_t **ret_hashes,
                     const uint8_t **ret_blob);
typedef int (*pcd_snapshot_cb)(void *ctx, const pcd_snapshot *snapshot);
/* Every snapshot's metadata, or those of one device (device_key may be
 * NULL). Reads only the small metadata records. */
int pcd_snapshots_foreach(pcd_txn *txn, const uint8_t *device_key, pcd_snapshot_cb cb, void *ctx);
/* The least recently stored snapshot other than (skip_key, skip_app)
 * (skip_key may be NULL). PCACHE_ENOT_FOUND when none. */
int pcd_snapshot_oldest(pcd_txn *txn, const uint8_t *skip_key, const char *skip_app,
                        pcd_snapshot *ret_snapshot);

/* The least recently used entry's key. PCACHE_ENOT_FOUND when empty. */
int pcd_lru_oldest(pcd_txn *txn, uint8_t ret_key[PCD_ENTRY_KEY_SIZE]);

/* Writes (write txn only). */
/* Records or refreshes a device (first/last seen). Strings longer than
 * PCD_MAX_DEVICE_STRING are cut, a deviceUUID not of 16 bytes and unknown
 * fields dropped; a record's deviceUUID stays when a client sends none. */
int pcd_device_touch(pcd_txn *txn, const Pcachepb__DeviceInfo *info, uint64_t now_s);
/* Removes a device record that holds no entries and no snapshots (0 when
 * there is none): a request whose every item was refused leaves nothing
 * behind. The store does the same by itself when a device's last entry
 * or snapshot goes (eviction, purge, report). */
int pcd_device_forget(pcd_txn *txn, const uint8_t key[PCACHE_DEVKEY_SIZE]);
/* Adds one reference to a module, storing code when it is new (code may be
 * NULL when the caller knows the module exists). */
int pcd_module_ref(pcd_txn *txn, const pcache__hash *hash, const void *code, size_t size);
/*
 * pcd_entry_store - inserts or replaces an entry. The caller validated it
 * and took the module references its description needs; a replaced entry
 * keeps its created time and hits and drops its own references.
 * entry->blob_size/desc_size/checksum are taken from the buffers.
 */
int pcd_entry_store(pcd_txn *txn, const pcd_entry *entry, const void *blob, const void *desc);
/* Deletes an entry and everything that hangs off it (blob, description,
 * indexes, module references). ret_bytes: its size (pcd_entry_size).
 * PCACHE_ENOT_FOUND when absent. */
int pcd_entry_delete(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t *ret_bytes);
/* Stores (replacing) the snapshot of (snapshot->device_key, app);
 * blob_size, n_hashes and checksum are taken as given (the caller
 * computed the checksum). */
int pcd_snapshot_store(pcd_txn *txn, const pcd_snapshot *snapshot, const void *hashes,
                       const void *blob);
/* ret_bytes (may be NULL): its size freed (its hashes and blob, and its
 * records, as pcd_entry_size counts an entry's).
 * PCACHE_ENOT_FOUND when absent. */
int pcd_snapshot_delete(pcd_txn *txn, const uint8_t device_key[PCACHE_DEVKEY_SIZE], const char *app,
                        uint64_t *ret_bytes);
/* Sets last_used (if newer) and adds hits. Absent entries are ignored. */
int pcd_entry_touch(pcd_txn *txn, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t last_used_us,
                    uint64_t hits);

/* Program names (store_replay.c, in `info`: docs/storage.md). */
/* Longest program name kept: the basename of a client's executable
 * (/proc/PID/exe), which NVIDIA's driver files its own disk cache under
 * (docs/replay.md "Builds under the program's name"). */
#define PCD_EXE_NAME_MAX 64
/* Whether name (len bytes) may be a program name the replayer runs
 * under: 1..PCD_EXE_NAME_MAX bytes of [A-Za-z0-9._+-], not "." or "..".
 * It becomes a file name under the data directory, and a fleet's value
 * is no one's word: anything else is refused. */
int pcd_exe_name_ok(const char *name, size_t len);
/* Write txn: records that app's programs run as an executable named exe
 * (which must pass pcd_exe_name_ok: -EINVAL otherwise), seen at now_s
 * (unix seconds). */
int pcd_app_exe_put(pcd_txn *txn, const char *app, const char *exe, uint64_t now_s);
/* The program name recorded for app, into out: 0, PCACHE_ENOT_FOUND (none,
 * or a record that does not decode or whose name fails the check) or
 * PCACHE_ESTORE. */
int pcd_app_exe_get(pcd_txn *txn, const char *app, char out[PCD_EXE_NAME_MAX + 1]);

#endif
