/* The fleet tier's values and keys (remote_pack.h). Packing runs on the
 * writer thread, inside the transaction that stored the item, because an
 * item's modules may be in the store only (its client sent them with an
 * earlier Put), and a fleet value must carry them all: the machine that
 * fetches it may never have seen them. A module shared by many pipelines
 * is so written once per value; in exchange each value stands alone, and
 * Redis may evict any key without breaking another. */
#include "remote_pack.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/bytes.h"
#include "proto/desc_check.h"

/* A push holding req packed behind the fleet header. */
static int pack_request(const Pcachepb__Request *req, pcd_push_kind kind, pcd_push **ret_push) {
  size_t size = pcachepb__request__get_packed_size(req);
  pcd_push *p = pcache__calloc(1, sizeof *p + PCD_FLEET_HEADER + size);
  if (!p)
    return -ENOMEM;
  p->kind = kind;
  p->size = PCD_FLEET_HEADER + size;
  pcachepb__request__pack(req, p->value + PCD_FLEET_HEADER);
  memcpy(p->value, PCD_FLEET_MAGIC, 4);
  pcache__put_le64(p->value + PCD_FLEET_CHECKSUM_AT,
                   pcache__checksum64(p->value + PCD_FLEET_HEADER, size));
  *ret_push = p;
  return 0;
}

int pcd_remote_pack_item(pcd_txn *txn, const Pcachepb__Put *put, const Pcachepb__PutItem *item,
                         const char *app, pcd_push **ret_push) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Put one = PCACHEPB__PUT__INIT;
  Pcachepb__PutItem it = *item;
  Pcachepb__PutItem *items[1] = {&it};
  Pcachepb__Module mods[PCACHE_DESC_MAX_MODULES], *mod_ptrs[PCACHE_DESC_MAX_MODULES];
  pcache__hash sh, hashes[PCACHE_DESC_MAX_MODULES];
  size_t n = 0;
  pcd_push *p;
  int r;

  memcpy(sh.bytes, item->state_hash.data, PCACHE_HASH_SIZE);
  if ((r = pcache__desc_check(item->desc.data, item->desc.len, &sh, (uint32_t)item->kind, hashes,
                              &n)) < 0)
    return r;
  for (size_t i = 0; i < n; i++) {
    const uint8_t *code = NULL;
    size_t size = 0;
    for (size_t k = 0; k < item->n_modules && !code; k++)
      if (item->modules[k]->hash.len == PCACHE_HASH_SIZE &&
          memcmp(item->modules[k]->hash.data, hashes[i].bytes, PCACHE_HASH_SIZE) == 0) {
        code = item->modules[k]->code.data;
        size = item->modules[k]->code.len;
      }
    if (!code && (r = pcd_module_get(txn, &hashes[i], &code, &size)) < 0)
      return r == PCACHE_ENOT_FOUND ? PCACHE_EMISSING_MODULE : r;
    pcachepb__module__init(&mods[i]);
    mods[i].hash.data = hashes[i].bytes;
    mods[i].hash.len = PCACHE_HASH_SIZE;
    mods[i].code.data = (uint8_t *)code;
    mods[i].code.len = size;
    mod_ptrs[i] = &mods[i];
  }
  it.modules = mod_ptrs;
  it.n_modules = n;
  one.device = put->device;
  one.items = items;
  one.n_items = 1;
  one.app = (char *)"";
  req.body_case = PCACHEPB__REQUEST__BODY_PUT;
  req.put = &one;
  if ((r = pack_request(&req, PCD_PUSH_ENTRY, &p)) < 0)
    return r;
  memcpy(p->device_key, put->device->key.data, PCACHE_DEVKEY_SIZE);
  memcpy(p->state_hash, item->state_hash.data, PCACHE_HASH_SIZE);
  snprintf(p->app, sizeof p->app, "%s", app);
  *ret_push = p;
  return 0;
}

int pcd_remote_pack_snapshot(const Pcachepb__PutSnapshot *snapshot, const char *app,
                             pcd_push **ret_push) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__PutSnapshot ps = *snapshot;
  pcd_push *p;
  int r;
  ps.app = (char *)"";
  req.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
  req.put_snapshot = &ps;
  if ((r = pack_request(&req, PCD_PUSH_SNAPSHOT, &p)) < 0)
    return r;
  memcpy(p->device_key, snapshot->device->key.data, PCACHE_DEVKEY_SIZE);
  snprintf(p->app, sizeof p->app, "%s", app);
  *ret_push = p;
  return 0;
}

void pcd_push_free_all(pcd_push *list) {
  while (list) {
    pcd_push *next = list->next;
    pcache__free(list);
    list = next;
  }
}

pcd_fleet_verdict pcd_fleet_unwrap(const uint8_t *value, size_t size, const uint8_t **ret_payload,
                                   size_t *ret_size) {
  if (size >= 12 && memcmp(value, PCD_FLEET_MAGIC_V1, 4) == 0 &&
      pcache__le64(value + 4) == pcache__checksum64(value + 12, size - 12))
    return PCD_FLEET_UNSIGNED;
  if (size < PCD_FLEET_HEADER || memcmp(value, PCD_FLEET_MAGIC, 4) != 0 ||
      pcache__le64(value + PCD_FLEET_CHECKSUM_AT) !=
          pcache__checksum64(value + PCD_FLEET_HEADER, size - PCD_FLEET_HEADER))
    return PCD_FLEET_DAMAGED;
  *ret_payload = value + PCD_FLEET_HEADER;
  *ret_size = size - PCD_FLEET_HEADER;
  return PCD_FLEET_OK;
}

/* prefix, tag, the device key in hex, ':' */
static size_t key_head(char *out, const char *prefix, const char *tag, const uint8_t *device_key) {
  char hex[2 * PCACHE_DEVKEY_SIZE + 1];
  pcache__hex(device_key, PCACHE_DEVKEY_SIZE, hex);
  return (size_t)snprintf(out, PCD_FLEET_KEY_MAX, "%s%s:%s:", prefix, tag, hex);
}

size_t pcd_fleet_key_entry(char *out, const char *prefix, const uint8_t *device_key,
                           const uint8_t *state_hash) {
  size_t n = key_head(out, prefix, "e", device_key);
  pcache__hex(state_hash, PCACHE_HASH_SIZE, out + n);
  return n + 2 * PCACHE_HASH_SIZE;
}

size_t pcd_fleet_key_index(char *out, const char *prefix, const uint8_t *device_key,
                           const char *app) {
  size_t n = key_head(out, prefix, "a", device_key);
  return n + (size_t)snprintf(out + n, PCD_FLEET_KEY_MAX - n, "%s", app);
}

size_t pcd_fleet_key_snapshot(char *out, const char *prefix, const uint8_t *device_key,
                              const char *app) {
  size_t n = key_head(out, prefix, "s", device_key);
  return n + (size_t)snprintf(out + n, PCD_FLEET_KEY_MAX - n, "%s", app);
}

size_t pcd_fleet_key_exe(char *out, const char *prefix, const char *app) {
  return (size_t)snprintf(out, PCD_FLEET_KEY_MAX, "%sx:%s", prefix, app);
}
