/* One pipeline to validate and store (item.c): what Put and Import share. */
#ifndef PCD_ITEM_H
#define PCD_ITEM_H

#include <stddef.h>
#include <stdint.h>

#include "common/arena.h"
#include "daemon.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "proto/pcache.pb-c.h"
#include "store.h"

/* One pipeline to validate and store, from a PutItem or an archive entry:
 * both go through the same checks (pcd_item_store). */
typedef struct pcd_item {
  const uint8_t *state_hash;
  size_t state_hash_len;
  uint32_t kind;
  const uint8_t *blob;
  size_t blob_size;
  const uint8_t *desc;
  size_t desc_size;
  /* Module code that came with the item (Put) ... */
  Pcachepb__Module **modules;
  size_t n_modules;
  /* ... or a lookup of code that came with it (Import); may be NULL. */
  int (*find_module)(void *ctx, const pcache__hash *hash, const void **ret_code, size_t *ret_size);
  void *find_ctx;
  const char *app;
  uint64_t compile_ns, created_us, last_used_us, hits;
  /* A staged item (Put.stage; docs/replay.md "Staged builds"): filed under
   * the staged key of the device key (pcache__devkey_staged), for the
   * replayer to build. Its blob may be empty (a description only); one
   * that is not, a seed, is checked against the device key itself. */
  int staged;
} pcd_item;

/*
 * pcd_item_store - validates item for the device and stores it (under the
 * staged key of key when item->staged). key itself may not carry the
 * staged mark: such an item is refused with PCACHE_EBAD_KEY. Writes the
 * item's verdict (0 or a PCACHE_E* code, with a message from arena) to
 * ret_status/ret_message; nothing is stored when it is not 0. Returns 0,
 * 1 (a staged item, valid, not filed: key has its state hash already,
 * so there is nothing to build) or a transaction-spoiling code.
 */
int pcd_item_store(pcd_txn *txn, const pcache__devkey *key, const pcd_item *item, uint64_t max_blob,
                   pcache__arena *arena, int *ret_status, char **ret_message);

/* Bytes an item counts against --max-size once stored: blob, description
 * and the modules it carries. */
uint64_t pcd_item_cost(const pcd_item *item);

#endif
