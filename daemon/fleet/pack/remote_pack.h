/* What the fleet tier stores in Redis, with no Redis in it: the values
 * (packed on the writer thread from what it just stored, unwrapped on the
 * remote's loop) and the keys (docs/fleet.md, "What is in Redis").
 *
 * A value is the request that uploaded it, as a client sends it: a
 * Request{Put} of one item carrying every SPIR-V module its description
 * names, or a Request{PutSnapshot}, each with the app left empty (a fleet
 * entry is filed under the app that fetched it). In front of it go a magic
 * number, the payload's checksum, so that damage in Redis is refused
 * before anything else, and the signature of the daemon that pushed it
 * (remote_trust.h has the layout; the remote's loop signs a value just
 * before it is written, and checks one as it arrives); then it is
 * checked as an upload is. */
#ifndef PCD_REMOTE_PACK_H
#define PCD_REMOTE_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "proto/pcache.pb-c.h"
#include "remote_trust.h"
#include "store.h"

/* Longest key: the prefix, a tag, the device key and a hash or an app, in
 * hex or as is. */
#define PCD_FLEET_KEY_MAX (64 + 4 + 2 * PCACHE_DEVKEY_SIZE + 1 + PCD_MAX_APP + 1)

typedef enum pcd_push_kind { PCD_PUSH_ENTRY, PCD_PUSH_SNAPSHOT } pcd_push_kind;

/* One value to write to Redis, with what names its keys. */
typedef struct pcd_push {
  struct pcd_push *next;
  pcd_push_kind kind;
  uint8_t device_key[PCACHE_DEVKEY_SIZE];
  uint8_t state_hash[PCACHE_HASH_SIZE]; /* ENTRY */
  char app[PCD_MAX_APP + 1];            /* ENTRY: the app's index; SNAPSHOT: whose */
  /* ENTRY: the program name app runs as, when recorded, on the first
   * entry of a Put ("" on the others): written to x:APP beside it. */
  char exe[PCD_EXE_NAME_MAX + 1];
  size_t size;
  uint8_t value[]; /* PCD_FLEET_HEADER (key id and signature still 0) + payload */
} pcd_push;

/*
 * pcd_remote_pack_item - the value of an item the writer just stored for
 * put's device (in txn, which still holds the item's modules). app is the
 * one it was filed under. Returns 0, -ENOMEM, or PCACHE_EMISSING_MODULE /
 * PCACHE_EBAD_DESC when the description cannot be carried whole (then
 * nothing is pushed).
 */
int pcd_remote_pack_item(pcd_txn *txn, const Pcachepb__Put *put, const Pcachepb__PutItem *item,
                         const char *app, pcd_push **ret_push);

/* The value of a snapshot just stored for (device, app). 0 or -ENOMEM. */
int pcd_remote_pack_snapshot(const Pcachepb__PutSnapshot *snapshot, const char *app,
                             pcd_push **ret_push);

/* Frees a list linked through next (NULL is fine). */
void pcd_push_free_all(pcd_push *list);

/* The payload of a value: PCD_FLEET_OK (its signature still to be
 * checked: pcd_trust_verify), PCD_FLEET_UNSIGNED for a format-1 value,
 * or PCD_FLEET_DAMAGED when the magic or the checksum is wrong (or it is
 * too short to have them). */
pcd_fleet_verdict pcd_fleet_unwrap(const uint8_t *value, size_t size, const uint8_t **ret_payload,
                                   size_t *ret_size);

/* Keys: an entry, the state hashes (hex members) of (device, app), a
 * snapshot. Each writes a NUL-terminated key of at most
 * PCD_FLEET_KEY_MAX bytes and returns its length. With prefix "", the
 * name a value's signature covers. */
size_t pcd_fleet_key_entry(char *out, const char *prefix, const uint8_t *device_key,
                           const uint8_t *state_hash);
size_t pcd_fleet_key_index(char *out, const char *prefix, const uint8_t *device_key,
                           const char *app);
size_t pcd_fleet_key_snapshot(char *out, const char *prefix, const uint8_t *device_key,
                              const char *app);
/* The program name app runs as (a plain value, not signed: docs/fleet.md
 * "What is in Redis"), the same for every device. */
size_t pcd_fleet_key_exe(char *out, const char *prefix, const char *app);

#endif
