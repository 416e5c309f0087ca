/* Device records: one a device key, what the device reported and how
 * many entries and bytes it holds; made by the first write for a device
 * and dropped with its last entry and snapshot. */
#include "store_internal.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/bytes.h"

#define DEVICE_VERSION 1
#define DEVICE_SIZE 40

static int decode_device(const uint8_t *key, const MDB_val *v, pcd_device *d) {
  const uint8_t *p = v->mv_data;
  if (v->mv_size < DEVICE_SIZE || p[0] != DEVICE_VERSION)
    return PCACHE_ESTORE;
  memcpy(d->key, key, PCACHE_DEVKEY_SIZE);
  d->first_seen = pcache__le64(p + 8);
  d->last_seen = pcache__le64(p + 16);
  d->entries = pcache__le64(p + 24);
  d->bytes = pcache__le64(p + 32);
  d->info = p + DEVICE_SIZE;
  d->info_size = v->mv_size - DEVICE_SIZE;
  return 0;
}

int pcd_device_get(pcd_txn *txn, const uint8_t key[PCACHE_DEVKEY_SIZE], pcd_device *ret_device) {
  MDB_val v;
  int r = pcd_db_get(txn, txn->store->devices, key, PCACHE_DEVKEY_SIZE, &v, "get device");
  return r < 0 ? r : decode_device(key, &v, ret_device);
}

struct device_scan {
  pcd_device_cb cb;
  void *ctx;
};

static int device_kv(void *ctx, const MDB_val *k, const MDB_val *v) {
  struct device_scan *s = ctx;
  pcd_device d;
  if (k->mv_size != PCACHE_DEVKEY_SIZE || decode_device(k->mv_data, v, &d) < 0)
    return 0;
  return s->cb(s->ctx, &d);
}

int pcd_devices_foreach(pcd_txn *txn, pcd_device_cb cb, void *ctx) {
  struct device_scan s = {cb, ctx};
  return pcd_db_scan(txn, txn->store->devices, NULL, 0, device_kv, &s);
}

/* Deletes a device record with no entries and no snapshots: nothing of it
 * is left to serve, and records of devices long gone would otherwise fill
 * the store (they count against --max-size). 0 when it is still used. */
static int device_drop_if_unused(pcd_txn *t, const uint8_t *devkey) {
  MDB_val v, k = {PCACHE_DEVKEY_SIZE, (void *)devkey};
  MDB_cursor *cur;
  int64_t bytes;
  int r = pcd_db_get(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, &v, "get device"), rc;
  if (r < 0)
    return r == PCACHE_ENOT_FOUND ? 0 : r;
  if (v.mv_size >= DEVICE_SIZE && pcache__le64((const uint8_t *)v.mv_data + 24) != 0)
    return 0;
  bytes = (int64_t)(PCACHE_DEVKEY_SIZE + v.mv_size);
  if ((rc = mdb_cursor_open(t->txn, t->store->snapshots, &cur)) != 0)
    return pcd_db_err(t, rc, "cursor");
  rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
  r = rc == 0 && k.mv_size >= PCACHE_DEVKEY_SIZE &&
      memcmp(k.mv_data, devkey, PCACHE_DEVKEY_SIZE) == 0;
  mdb_cursor_close(cur);
  if (rc != 0 && rc != MDB_NOTFOUND)
    return pcd_db_err(t, rc, "snapshot seek");
  if (r)
    return 0;
  if ((r = pcd_db_del(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, "delete device")) < 0)
    return r;
  return pcd_counter_add(t, "device_bytes", -bytes);
}

int pcd_device_add(pcd_txn *t, const uint8_t *devkey, int64_t entries, int64_t bytes) {
  MDB_val v;
  uint8_t *buf;
  uint64_t e, b;
  int r = pcd_db_get(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, &v, "get device");
  if (r == PCACHE_ENOT_FOUND)
    return 0;
  if (r < 0)
    return r;
  if (v.mv_size < DEVICE_SIZE)
    return PCACHE_ESTORE;
  buf = pcache__malloc(v.mv_size);
  if (!buf)
    return -ENOMEM;
  memcpy(buf, v.mv_data, v.mv_size);
  e = pcache__le64(buf + 24);
  b = pcache__le64(buf + 32);
  e = entries < 0 && (uint64_t)-entries > e ? 0 : e + (uint64_t)entries;
  b = bytes < 0 && (uint64_t)-bytes > b ? 0 : b + (uint64_t)bytes;
  pcache__put_le64(buf + 24, e);
  pcache__put_le64(buf + 32, b);
  r = pcd_db_put(t, t->store->devices, devkey, PCACHE_DEVKEY_SIZE, buf, v.mv_size, "put device");
  pcache__free(buf);
  if (r == 0 && e == 0)
    r = device_drop_if_unused(t, devkey);
  return r;
}

/* Copies at most PCD_MAX_DEVICE_STRING bytes of s into out, cut at a
 * UTF-8 character boundary. */
static char *bounded_string(const char *s, char out[PCD_MAX_DEVICE_STRING + 1]) {
  size_t n = s ? strnlen(s, PCD_MAX_DEVICE_STRING + 1) : 0;
  if (n > PCD_MAX_DEVICE_STRING) {
    n = PCD_MAX_DEVICE_STRING;
    while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
      n--;
  }
  if (n)
    memcpy(out, s, n);
  out[n] = '\0';
  return out;
}

/* The stored record's info, unpacked (NULL when it has none or it does
 * not parse: then nothing is kept from it). */
static Pcachepb__DeviceInfo *stored_info(const MDB_val *v) {
  if (v->mv_size <= DEVICE_SIZE)
    return NULL;
  return pcachepb__device_info__unpack(&pcache__pb_allocator, v->mv_size - DEVICE_SIZE,
                                       (const uint8_t *)v->mv_data + DEVICE_SIZE);
}

int pcd_device_touch(pcd_txn *txn, const Pcachepb__DeviceInfo *client_info, uint64_t now_s) {
  char name[PCD_MAX_DEVICE_STRING + 1], driver_name[PCD_MAX_DEVICE_STRING + 1],
      driver_info[PCD_MAX_DEVICE_STRING + 1];
  uint8_t device_uuid[PCACHE_UUID_SIZE];
  Pcachepb__DeviceInfo bounded = PCACHEPB__DEVICE_INFO__INIT, *info = &bounded, *old = NULL;
  MDB_val v;
  uint8_t *buf;
  size_t n;
  uint64_t first = now_s, entries = 0, bytes = 0;
  int64_t old_size = 0;
  int r;
  if (client_info->key.len != PCACHE_DEVKEY_SIZE)
    return PCACHE_EBAD_KEY;
  /* The record keeps what Vulkan reports (its strings are at most 255
   * bytes) and nothing else: the client's strings are cut there and
   * fields this daemon does not know are dropped, so a record is small
   * and bounded whatever a client sends. */
  bounded.key = client_info->key;
  bounded.driver_id = client_info->driver_id;
  bounded.api_version = client_info->api_version;
  bounded.name = bounded_string(client_info->name, name);
  bounded.driver_name = bounded_string(client_info->driver_name, driver_name);
  bounded.driver_info = bounded_string(client_info->driver_info, driver_info);
  r = pcd_db_get(txn, txn->store->devices, info->key.data, PCACHE_DEVKEY_SIZE, &v, "get device");
  if (r < 0 && r != PCACHE_ENOT_FOUND)
    return r;
  if (r == 0)
    old_size = (int64_t)(PCACHE_DEVKEY_SIZE + v.mv_size);
  if (r == 0 && v.mv_size >= DEVICE_SIZE) {
    const uint8_t *p = v.mv_data;
    first = pcache__le64(p + 8);
    entries = pcache__le64(p + 24);
    bytes = pcache__le64(p + 32);
  }
  /* The deviceUUID and the driver's identity (VkPhysicalDeviceIDProperties,
   * VkPhysicalDeviceDriverProperties) name the device and driver the key
   * was made from; a client that cannot ask for them (a Vulkan 1.0
   * instance, an older libpcache, an import of an older archive) has not
   * changed them: what it leaves out keeps the value known. */
  if (r == 0)
    old = stored_info(&v);
  if (client_info->device_uuid.len == PCACHE_UUID_SIZE) {
    memcpy(device_uuid, client_info->device_uuid.data, PCACHE_UUID_SIZE);
    bounded.device_uuid = (ProtobufCBinaryData){.len = PCACHE_UUID_SIZE, .data = device_uuid};
  } else if (old && old->device_uuid.len == PCACHE_UUID_SIZE) {
    memcpy(device_uuid, old->device_uuid.data, PCACHE_UUID_SIZE);
    bounded.device_uuid = (ProtobufCBinaryData){.len = PCACHE_UUID_SIZE, .data = device_uuid};
  }
  if (old && !bounded.driver_id && !bounded.driver_name[0] && !bounded.driver_info[0]) {
    bounded.driver_id = old->driver_id;
    bounded.driver_name = bounded_string(old->driver_name, driver_name);
    bounded.driver_info = bounded_string(old->driver_info, driver_info);
  }
  pcachepb__device_info__free_unpacked(old, &pcache__pb_allocator);
  n = pcachepb__device_info__get_packed_size(info);
  buf = pcache__malloc(DEVICE_SIZE + n);
  if (!buf)
    return -ENOMEM;
  memset(buf, 0, DEVICE_SIZE);
  buf[0] = DEVICE_VERSION;
  pcache__put_le64(buf + 8, first);
  pcache__put_le64(buf + 16, now_s);
  pcache__put_le64(buf + 24, entries);
  pcache__put_le64(buf + 32, bytes);
  pcachepb__device_info__pack(info, buf + DEVICE_SIZE);
  r = pcd_db_put(txn, txn->store->devices, info->key.data, PCACHE_DEVKEY_SIZE, buf, DEVICE_SIZE + n,
                 "put device");
  pcache__free(buf);
  if (r == 0)
    r = pcd_counter_add(txn, "device_bytes",
                        (int64_t)(PCACHE_DEVKEY_SIZE + DEVICE_SIZE + n) - old_size);
  return r;
}

int pcd_device_forget(pcd_txn *txn, const uint8_t key[PCACHE_DEVKEY_SIZE]) {
  return device_drop_if_unused(txn, key);
}
