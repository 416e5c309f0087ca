/* One pipeline validated and stored, whether it came in a Put or in an
 * archive's Import: both go through exactly these checks (the blob's
 * header against the device, the description against its state hash, the
 * SPIR-V it names), so an archive is as untrusted as a client. */
#include "item.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/blob.h"
#include "common/log.h"
#include "proto/desc_check.h"
#include "store_replay.h"

/* The code of module hash, carried by the item or found by its
 * find_module: 1 with *code and *size when found, 0 when not (the store
 * may have it). A module the item carries that fails its check is not an
 * error of the call but the item's refusal: 0 with *ret_status set. */
static int find_item_module(const pcd_item *item, const pcache__hash *hash, const void **code,
                            size_t *size, int *ret_status) {
  for (size_t i = 0; i < item->n_modules; i++) {
    const Pcachepb__Module *m = item->modules[i];
    pcache__hash h;
    if (m->hash.len != PCACHE_HASH_SIZE) {
      *ret_status = PCACHE_EBAD_DESC;
      return 0;
    }
    if (memcmp(m->hash.data, hash->bytes, PCACHE_HASH_SIZE) != 0)
      continue;
    pcache__hash128(m->code.data, m->code.len, &h);
    if (!pcache__hash_equal(&h, hash)) {
      *ret_status = PCACHE_ECHECKSUM;
      return 0;
    }
    *code = m->code.data;
    *size = m->code.len;
    return 1;
  }
  if (item->find_module && item->find_module(item->find_ctx, hash, code, size) == 0)
    return 1;
  return 0;
}

int pcd_item_store(pcd_txn *txn, const pcache__devkey *key, const pcd_item *item, uint64_t max_blob,
                   pcache__arena *arena, int *ret_status, char **ret_message) {
  pcache__hash sh, mods[PCACHE_DESC_MAX_MODULES];
  const void *codes[PCACHE_DESC_MAX_MODULES] = {0};
  size_t sizes[PCACHE_DESC_MAX_MODULES] = {0}, n_mods = 0;
  char hex[33];
  pcd_entry e;
  pcache__devkey file_key = *key;
  uint64_t now;
  int st = 0, r;
  const char *why = NULL;

  *ret_message = NULL;
  if (pcache__devkey_is_staged(key)) {
    /* Only this daemon files under a staged key (the replayer's work):
     * an archive or the fleet naming one is refused like a client. */
    st = PCACHE_EBAD_KEY;
    why = "device key has the staged mark: no device has it";
    goto out_refuse;
  }
  if (item->staged)
    pcache__devkey_staged(key, &file_key);
  if (item->state_hash_len != PCACHE_HASH_SIZE) {
    st = PCACHE_EBAD_KEY;
    why = "state hash is not 16 bytes";
    goto out_refuse;
  }
  memcpy(sh.bytes, item->state_hash, PCACHE_HASH_SIZE);
  if (item->blob_size > max_blob) {
    st = PCACHE_EBLOB_TOO_LARGE;
    goto out_refuse;
  }
  /* A staged item's seed is the device's blob like any other; a staged
   * description needs none. */
  if (!(item->staged && item->blob_size == 0) &&
      (st = pcache__blob_check_header(item->blob, item->blob_size, key)) < 0)
    goto out_refuse;
  if (item->desc_size == 0) {
    st = PCACHE_EBAD_DESC;
    why = "no pipeline description";
    goto out_refuse;
  }
  st = pcache__desc_check(item->desc, item->desc_size, &sh, item->kind, mods, &n_mods);
  if (st < 0)
    goto out_refuse;
  for (size_t i = 0; i < n_mods; i++) {
    int found = find_item_module(item, &mods[i], &codes[i], &sizes[i], &st);
    if (st < 0)
      goto out_refuse;
    if (found)
      continue;
    r = pcd_module_get(txn, &mods[i], NULL, NULL);
    if (r == PCACHE_ENOT_FOUND) {
      pcache__hash_format(&mods[i], hex);
      st = PCACHE_EMISSING_MODULE;
      *ret_message = pcache__arena_printf(arena, "%s: %s", pcache_strerror(st), hex);
      goto out_refuse_msg;
    }
    if (r < 0)
      return r;
  }

  if (item->staged) {
    /* Nothing to build when the device has the pipeline already (a
     * client's upload, or an earlier build): valid, and not filed. */
    uint8_t k[PCD_ENTRY_KEY_SIZE];
    memcpy(k, key->bytes, PCACHE_DEVKEY_SIZE);
    memcpy(k + PCACHE_DEVKEY_SIZE, sh.bytes, PCACHE_HASH_SIZE);
    if ((r = pcd_entry_get(txn, k, &e)) == 0) {
      *ret_status = 0;
      return 1;
    }
    if (r != PCACHE_ENOT_FOUND && r != PCACHE_ESTORE) /* damaged: the build replaces it */
      return r;
    /* Already staged with a seed (a fleet sync's), and this one brings
     * none: the seed stays, and with it the build's origin (a build from a
     * seed is not pushed back, ops_put.c). */
    memcpy(k, file_key.bytes, PCACHE_DEVKEY_SIZE);
    if (item->blob_size == 0 && pcd_entry_get(txn, k, &e) == 0 && e.blob_size > 0) {
      *ret_status = 0;
      return 1;
    }
    /* Its build failed before (a recorded bad pipeline): filing it again
     * would only start a replayer that skips it. */
    if (pcd_replay_bad_get(txn, file_key.bytes, key->bytes, &sh) == 0) {
      *ret_status = 0;
      return 1;
    }
  }
  for (size_t i = 0; i < n_mods; i++)
    if ((r = pcd_module_ref(txn, &mods[i], codes[i], sizes[i])) < 0)
      return r;
  memset(&e, 0, sizeof e);
  memcpy(e.key, file_key.bytes, PCACHE_DEVKEY_SIZE);
  memcpy(e.key + PCACHE_DEVKEY_SIZE, sh.bytes, PCACHE_HASH_SIZE);
  e.kind = item->kind;
  e.blob_size = item->blob_size;
  e.desc_size = item->desc_size;
  e.checksum = pcache__checksum64(item->blob, item->blob_size);
  /* Times from archives (and any a client could name) are clamped to now:
   * an entry dated in the future would sort after every fresh one in the
   * LRU and never be evicted. */
  now = pcd_now_us();
  e.created_us = item->created_us < now ? item->created_us : now;
  e.last_used_us = item->last_used_us < now ? item->last_used_us : now;
  e.hits = item->hits;
  e.compile_ns = item->compile_ns;
  snprintf(e.app, sizeof e.app, "%s", item->app ? item->app : "");
  r = pcd_entry_store(txn, &e, item->blob, item->desc);
  if (r < 0)
    return r;
  *ret_status = 0;
  return 0;

out_refuse:
  *ret_message = pcache__arena_strdup(arena, why ? why : pcache_strerror(st));
out_refuse_msg:
  *ret_status = st;
  return 0;
}

uint64_t pcd_item_cost(const pcd_item *item) {
  uint64_t n = item->blob_size + item->desc_size +
               pcd_entry_index_cost(item->app ? strnlen(item->app, PCD_MAX_APP) : 0);
  /* Modules the item carries may be stored already (and then cost
   * nothing more); counting them all keeps the bound simple and safe. */
  for (size_t i = 0; i < item->n_modules; i++)
    n += PCACHE_HASH_SIZE + 4 + item->modules[i]->code.len;
  return n;
}
