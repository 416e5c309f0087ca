#include "devkey.h"

#include <errno.h>
#include <string.h>

#include "hash.h"

void pcache__devkey_make(const uint8_t uuid[PCACHE_UUID_SIZE], uint32_t vendor_id,
                         uint32_t device_id, uint32_t driver_version, uint32_t driver_abi,
                         pcache__devkey *ret_key) {
  memcpy(ret_key->bytes, uuid, PCACHE_UUID_SIZE);
  pcache__put_le32(ret_key->bytes + 16, vendor_id);
  pcache__put_le32(ret_key->bytes + 20, device_id);
  pcache__put_le32(ret_key->bytes + 24, driver_version);
  pcache__put_le32(ret_key->bytes + 28, driver_abi);
}

/* Versioned: a new derivation must give new keys, never collide with these. */
#define BINARY_KEY_TAG "pcache binary key v1"

void pcache__devkey_binary(const pcache__devkey *base, const uint8_t *global_key,
                           uint32_t global_key_size, pcache__devkey *ret_key) {
  uint8_t buf[sizeof BINARY_KEY_TAG + PCACHE_UUID_SIZE + 4 + 32];
  size_t len = 0;
  pcache__hash h;
  if (global_key_size > 32)
    global_key_size = 32;
  memcpy(buf, BINARY_KEY_TAG, sizeof BINARY_KEY_TAG);
  len += sizeof BINARY_KEY_TAG;
  memcpy(buf + len, base->bytes, PCACHE_UUID_SIZE);
  len += PCACHE_UUID_SIZE;
  pcache__put_le32(buf + len, global_key_size);
  len += 4;
  memcpy(buf + len, global_key, global_key_size);
  len += global_key_size;
  pcache__hash128(buf, len, &h);
  *ret_key = *base;
  memcpy(ret_key->bytes, h.bytes, PCACHE_UUID_SIZE);
  pcache__put_le32(ret_key->bytes + 28, pcache__devkey_abi(base) | PCACHE_DEVKEY_ABI_BINARY);
}

void pcache__devkey_staged(const pcache__devkey *base, pcache__devkey *ret_key) {
  *ret_key = *base;
  pcache__put_le32(ret_key->bytes + 28, pcache__devkey_abi(base) | PCACHE_DEVKEY_ABI_STAGED);
}

int pcache__devkey_is_staged(const pcache__devkey *key) {
  return (pcache__devkey_abi(key) & PCACHE_DEVKEY_ABI_STAGED) != 0;
}

void pcache__devkey_unstaged(const pcache__devkey *staged, pcache__devkey *ret_key) {
  *ret_key = *staged;
  pcache__put_le32(ret_key->bytes + 28, pcache__devkey_abi(staged) & ~PCACHE_DEVKEY_ABI_STAGED);
}

const uint8_t *pcache__devkey_uuid(const pcache__devkey *key) { return key->bytes; }
uint32_t pcache__devkey_vendor(const pcache__devkey *key) { return pcache__le32(key->bytes + 16); }
uint32_t pcache__devkey_device(const pcache__devkey *key) { return pcache__le32(key->bytes + 20); }
uint32_t pcache__devkey_driver_version(const pcache__devkey *key) {
  return pcache__le32(key->bytes + 24);
}
uint32_t pcache__devkey_abi(const pcache__devkey *key) { return pcache__le32(key->bytes + 28); }

void pcache__uuid_format(const uint8_t uuid[PCACHE_UUID_SIZE], char out[37]) {
  char hex[33];
  pcache__hex(uuid, PCACHE_UUID_SIZE, hex);
  memcpy(out, hex, 8);
  out[8] = '-';
  memcpy(out + 9, hex + 8, 4);
  out[13] = '-';
  memcpy(out + 14, hex + 12, 4);
  out[18] = '-';
  memcpy(out + 19, hex + 16, 4);
  out[23] = '-';
  memcpy(out + 24, hex + 20, 12);
  out[36] = '\0';
}

int pcache__uuid_parse(const char *text, uint8_t ret_uuid[PCACHE_UUID_SIZE]) {
  char hex[33];
  size_t n = 0;
  for (const char *p = text; *p; p++) {
    if (*p == '-')
      continue;
    if (n == 32)
      return -EINVAL;
    hex[n++] = *p;
  }
  hex[n] = '\0';
  return pcache__unhex(hex, ret_uuid, PCACHE_UUID_SIZE);
}

void pcache__devkey_format(const pcache__devkey *key, char out[65]) {
  pcache__hex(key->bytes, PCACHE_DEVKEY_SIZE, out);
}

int pcache__devkey_parse(const char *text, pcache__devkey *ret_key) {
  return pcache__unhex(text, ret_key->bytes, PCACHE_DEVKEY_SIZE);
}
