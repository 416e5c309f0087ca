/* The archive round-trips what was written, and damage costs what it should:
 * a bad record only itself, a bad header or truncation the rest. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/alloc.h"
#include "proto/archive.h"
#include "common/blob.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "test.h"

typedef struct seen {
  int devices, modules, entries, bad;
  uint64_t bad_index[16];
  int bad_err[16];
  char device_names[4][64];
  pcache__hash module_hash;
  size_t module_size;
  pcache__archive_entry last_entry;
  char last_app[64];
  uint8_t last_blob[64];
  int stop_after_entries; /* nonzero: the entry callback returns 42 then */
} seen;

static int on_device(void *ctx, const Pcachepb__DeviceInfo *info) {
  seen *s = ctx;
  if (s->devices < 4)
    snprintf(s->device_names[s->devices], sizeof s->device_names[0], "%s", info->name);
  s->devices++;
  return 0;
}

static int on_module(void *ctx, const pcache__hash *hash, const void *code, size_t size) {
  seen *s = ctx;
  pcache__hash check;
  pcache__hash128(code, size, &check);
  ASSERT_TRUE(pcache__hash_equal(&check, hash));
  s->module_hash = *hash;
  s->module_size = size;
  s->modules++;
  return 0;
}

static int on_entry(void *ctx, const pcache__archive_entry *entry) {
  seen *s = ctx;
  s->entries++;
  s->last_entry = *entry;
  snprintf(s->last_app, sizeof s->last_app, "%s", entry->app);
  ASSERT_LE(entry->blob_size, sizeof s->last_blob);
  memcpy(s->last_blob, entry->blob, entry->blob_size);
  /* The pointers are only valid during the call. */
  s->last_entry.app = NULL;
  s->last_entry.blob = NULL;
  s->last_entry.desc = NULL;
  if (s->stop_after_entries && s->entries == s->stop_after_entries)
    return 42;
  return 0;
}

static int on_bad(void *ctx, uint64_t index, int err) {
  seen *s = ctx;
  if (s->bad < 16) {
    s->bad_index[s->bad] = index;
    s->bad_err[s->bad] = err;
  }
  s->bad++;
  return 0;
}

static const pcache__archive_visitor visitor = {on_device, on_module, on_entry, on_bad, NULL};

static void make_key(uint8_t seed, pcache__devkey *ret_key) {
  uint8_t uuid[PCACHE_UUID_SIZE];
  memset(uuid, seed, sizeof uuid);
  pcache__devkey_make(uuid, 0x1000u + seed, 0x2000u + seed, 7, 8, ret_key);
}

/* An archive: device "gpu-a", one module, three entries (apps a0, a1, a2).
 * Record indexes: 0 device, 1 module, 2..4 entries, 5 end. */
static void build(uint8_t **ret_data, size_t *ret_size) {
  pcache__archive_writer *w;
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  pcache__devkey key;
  static const uint32_t spirv[] = {0x07230203, 0x00010000, 0, 1, 0};
  pcache__hash module_hash;

  make_key(1, &key);
  ASSERT_OK(pcache__archive_writer_new(&w));
  info.key.data = key.bytes;
  info.key.len = sizeof key.bytes;
  info.name = (char *)"gpu-a";
  ASSERT_OK(pcache__archive_add_device(w, &info));
  pcache__hash128(spirv, sizeof spirv, &module_hash);
  ASSERT_OK(pcache__archive_add_module(w, &module_hash, spirv, sizeof spirv));
  for (int i = 0; i < 3; i++) {
    uint8_t blob[40], desc[4] = {8, 1, 16, (uint8_t)(1 + (i & 1))};
    char app[8];
    pcache__archive_entry e;
    memset(&e, 0, sizeof e);
    pcache__blob_write_header(&key, blob);
    memset(blob + 32, i, 8);
    snprintf(app, sizeof app, "a%d", i);
    e.device_key = key;
    pcache__hash128(desc, sizeof desc, &e.state_hash);
    e.kind = (uint32_t)(1 + (i & 1));
    e.app = app;
    e.blob = blob;
    e.blob_size = sizeof blob;
    e.checksum = pcache__checksum64(blob, sizeof blob);
    e.desc = desc;
    e.desc_size = sizeof desc;
    e.created = 1000 + (uint64_t)i;
    e.last_used = 2000 + (uint64_t)i;
    e.hits = 30 + (uint64_t)i;
    e.compile_ns = 4000000 + (uint64_t)i;
    ASSERT_OK(pcache__archive_add_entry(w, &e));
  }
  ASSERT_OK(pcache__archive_finish(w, ret_data, ret_size));
  pcache__archive_writer_free(w);
}

/* Offset of record index in data (the framing is documented: 16-byte file
 * header, then u32 type | u32 length | u64 checksum | payload). */
static size_t record_offset(const uint8_t *data, size_t size, uint64_t index) {
  size_t off = 16;
  for (uint64_t i = 0; i < index; i++) {
    ASSERT_LE(off + 16, size);
    off += 16 + pcache__le32(data + off + 4);
  }
  return off;
}

static void test_round_trip(void) {
  uint8_t *data;
  size_t size;
  seen s;
  build(&data, &size);
  ASSERT_TRUE(memcmp(data, "PCACHEAR", 8) == 0);
  memset(&s, 0, sizeof s);
  ASSERT_OK(pcache__archive_read(data, size, &visitor, &s));
  ASSERT_EQ(s.devices, 1);
  ASSERT_STREQ(s.device_names[0], "gpu-a");
  ASSERT_EQ(s.modules, 1);
  ASSERT_EQ(s.module_size, 20);
  ASSERT_EQ(s.entries, 3);
  ASSERT_EQ(s.bad, 0);
  ASSERT_STREQ(s.last_app, "a2");
  ASSERT_EQ(s.last_entry.kind, 1);
  ASSERT_EQ(s.last_entry.blob_size, 40);
  ASSERT_EQ(s.last_entry.desc_size, 4);
  ASSERT_EQ(s.last_entry.created, 1002);
  ASSERT_EQ(s.last_entry.last_used, 2002);
  ASSERT_EQ(s.last_entry.hits, 32);
  ASSERT_EQ(s.last_entry.compile_ns, 4000002);
  ASSERT_EQ(s.last_entry.checksum, pcache__checksum64(s.last_blob, 40));
  ASSERT_EQ(s.last_blob[39], 2);
  {
    pcache__devkey key;
    make_key(1, &key);
    ASSERT_MEMEQ(s.last_entry.device_key.bytes, key.bytes, 32);
    ASSERT_OK(pcache__blob_check_header(s.last_blob, 40, &key));
  }
  pcache__free(data);
}

static void test_empty(void) {
  pcache__archive_writer *w;
  uint8_t *data;
  size_t size;
  seen s;
  ASSERT_OK(pcache__archive_writer_new(&w));
  ASSERT_OK(pcache__archive_finish(w, &data, &size));
  pcache__archive_writer_free(w);
  memset(&s, 0, sizeof s);
  ASSERT_OK(pcache__archive_read(data, size, &visitor, &s));
  ASSERT_EQ(s.devices + s.modules + s.entries + s.bad, 0);
  pcache__free(data);
  pcache__archive_writer_free(NULL);
}

/* A flipped byte inside one entry's payload: that entry is reported bad
 * and skipped, the others arrive, the read succeeds. */
static void test_bad_record(void) {
  uint8_t *data;
  size_t size, off;
  seen s;
  build(&data, &size);
  off = record_offset(data, size, 3);
  data[off + 16 + 5] ^= 0x40;
  memset(&s, 0, sizeof s);
  ASSERT_OK(pcache__archive_read(data, size, &visitor, &s));
  ASSERT_EQ(s.entries, 2);
  ASSERT_EQ(s.bad, 1);
  ASSERT_EQ(s.bad_index[0], 3);
  ASSERT_ERR(s.bad_err[0], PCACHE_ECHECKSUM);
  ASSERT_STREQ(s.last_app, "a2");

  /* A flipped type byte is caught too: the checksum covers it. */
  pcache__free(data);
  build(&data, &size);
  off = record_offset(data, size, 2);
  data[off] ^= 1;
  memset(&s, 0, sizeof s);
  ASSERT_OK(pcache__archive_read(data, size, &visitor, &s));
  ASSERT_EQ(s.entries, 2);
  ASSERT_EQ(s.bad, 1);
  ASSERT_EQ(s.bad_index[0], 2);
  pcache__free(data);
}

/* Cut anywhere: the records before the cut are visited, then
 * PCACHE_EARCHIVE. */
static void test_truncated(void) {
  uint8_t *data;
  size_t size;
  build(&data, &size);
  for (size_t cut = 0; cut < size; cut++) {
    seen s;
    memset(&s, 0, sizeof s);
    ASSERT_ERR(pcache__archive_read(data, cut, &visitor, &s), PCACHE_EARCHIVE);
    ASSERT_EQ(s.bad, 0);
  }
  {
    /* Cut exactly before the end record: every entry arrived, still an error. */
    seen s;
    memset(&s, 0, sizeof s);
    ASSERT_ERR(pcache__archive_read(data, record_offset(data, size, 5), &visitor, &s),
               PCACHE_EARCHIVE);
    ASSERT_EQ(s.entries, 3);
  }
  pcache__free(data);
}

static void test_header_damage(void) {
  uint8_t *data;
  size_t size, off;
  seen s;
  build(&data, &size);

  data[0] = 'X';
  memset(&s, 0, sizeof s);
  ASSERT_ERR(pcache__archive_read(data, size, &visitor, &s), PCACHE_EARCHIVE);
  ASSERT_EQ(s.devices + s.entries, 0);
  data[0] = 'P';

  pcache__put_le32(data + 8, 2);
  ASSERT_ERR(pcache__archive_read(data, size, &visitor, &s), PCACHE_EARCHIVE_VERSION);
  pcache__put_le32(data + 8, 1);

  pcache__put_le32(data + 12, 1);
  ASSERT_ERR(pcache__archive_read(data, size, &visitor, &s), PCACHE_EARCHIVE_VERSION);
  pcache__put_le32(data + 12, 0);

  /* A nonsense length stops the read. */
  off = record_offset(data, size, 3);
  pcache__put_le32(data + off + 4, 0x7fffffff);
  memset(&s, 0, sizeof s);
  ASSERT_ERR(pcache__archive_read(data, size, &visitor, &s), PCACHE_EARCHIVE);
  ASSERT_EQ(s.entries, 1);
  pcache__free(data);

  /* Trailing bytes after the end record. */
  build(&data, &size);
  {
    uint8_t *longer = pcache__realloc(data, size + 1);
    ASSERT_TRUE(longer != NULL);
    data = longer;
    data[size] = 0;
    ASSERT_ERR(pcache__archive_read(data, size + 1, &visitor, &s), PCACHE_EARCHIVE);
  }
  pcache__free(data);
}

static void test_callback_stops(void) {
  uint8_t *data;
  size_t size;
  seen s;
  build(&data, &size);
  memset(&s, 0, sizeof s);
  s.stop_after_entries = 2;
  ASSERT_EQ(pcache__archive_read(data, size, &visitor, &s), 42);
  ASSERT_EQ(s.entries, 2);
  pcache__free(data);
}

/* Read in slices: a callback that stops the read leaves the cursor on the
 * next record, and reading on from it visits every record exactly once
 * and ends as a whole read does. */
static void test_slices(void) {
  uint8_t *data;
  size_t size;
  pcache_archive_cursor cursor = {0};
  seen s;
  int r, calls = 0;
  build(&data, &size);
  memset(&s, 0, sizeof s);
  do {
    s.stop_after_entries = s.entries + 1;
    r = pcache__archive_read_from(data, size, &cursor, &visitor, &s);
    calls++;
    ASSERT_TRUE(r == 0 || r == 42);
  } while (r == 42);
  ASSERT_EQ(calls, 4); /* three entries, each stopping once, then the end */
  ASSERT_EQ(s.devices, 1);
  ASSERT_EQ(s.modules, 1);
  ASSERT_EQ(s.entries, 3);
  ASSERT_EQ(s.bad, 0);
  ASSERT_EQ(cursor.off, size);
  pcache__free(data);
}

/* Every single-byte flip anywhere either reads (the damage was caught per
 * record) or fails cleanly; never a crash (ASan runs this too). */
static void test_every_flip(void) {
  uint8_t *data;
  size_t size;
  build(&data, &size);
  for (size_t i = 0; i < size; i++) {
    seen s;
    int r;
    data[i] ^= 0x5a;
    memset(&s, 0, sizeof s);
    r = pcache__archive_read(data, size, &visitor, &s);
    ASSERT_TRUE(r == 0 || r == PCACHE_EARCHIVE || r == PCACHE_EARCHIVE_VERSION);
    if (i >= 16)
      ASSERT_LE(s.entries, 3);
    if (r == 0 && i >= 16)
      ASSERT_EQ(s.bad, 1);
    data[i] ^= 0x5a;
  }
  pcache__free(data);
}

static int on_program(void *ctx, const char *app, const char *exe) {
  char *out = ctx;
  size_t n = strlen(out);
  snprintf(out + n, 128 - n, "%s=%s;", app, exe);
  return 0;
}

/* Program records (a type added within version 1): read back by a reader
 * that takes them, and skipped, with the archive still whole, by one
 * that does not (as a reader older than them does). */
static void test_program(void) {
  pcache__archive_writer *w;
  pcache__archive_visitor with = {.program = on_program};
  char out[128] = "";
  uint8_t *data;
  size_t size;
  seen s;
  ASSERT_OK(pcache__archive_writer_new(&w));
  ASSERT_OK(pcache__archive_add_program(w, "game", "game.x86_64"));
  ASSERT_OK(pcache__archive_add_program(w, "", "../unchecked"));
  ASSERT_OK(pcache__archive_finish(w, &data, &size));
  pcache__archive_writer_free(w);
  ASSERT_OK(pcache__archive_read(data, size, &with, out));
  ASSERT_STREQ(out, "game=game.x86_64;=../unchecked;");
  memset(&s, 0, sizeof s);
  ASSERT_OK(pcache__archive_read(data, size, &visitor, &s));
  ASSERT_EQ(s.bad + s.entries + s.devices + s.modules, 0);
  /* A damaged one is a bad record like any other. */
  data[16 + 16] ^= 0xff;
  memset(&s, 0, sizeof s);
  ASSERT_OK(pcache__archive_read(data, size, &visitor, &s));
  ASSERT_EQ(s.bad, 1);
  pcache__free(data);
}

int main(void) {
  test_round_trip();
  test_program();
  test_empty();
  test_bad_record();
  test_truncated();
  test_header_damage();
  test_callback_stops();
  test_slices();
  test_every_flip();
  printf("ok\n");
  return 0;
}
