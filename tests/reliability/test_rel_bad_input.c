/* The bad-input matrix (docs/RELIABILITY.md): one row per kind of bad
 * input a peer can send. Each row runs on its own connection and asserts
 * the specific error the daemon answers with (and whether it closes the
 * connection); after each row nothing new is stored (entries, bytes,
 * devices, modules unchanged), the store still verifies clean, and a second
 * client, connected all along, is served right after. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/alloc.h"
#include "proto/archive.h"
#include "common/blob.h"
#include "proto/frame.h"
#include "rel_util.h"
#include "test.h"

#define MAX_BLOB (64u << 10)
#define MAX_HASHES 16u

static test_env env;
static pcache__devkey key;

typedef struct outcome {
  int code;   /* the status answered (request, first item or first problem); 0 when none */
  int closed; /* the daemon closed the connection */
} outcome;

/* The status a reply carries for its request, or for its first refused
 * item / archive record when the request as a whole went through. */
static int reply_code(const wire_reply *rep) {
  const Pcachepb__Response *r = rep->resp;
  if (r->status)
    return r->status;
  if (r->body_case == PCACHEPB__RESPONSE__BODY_PUT) {
    ASSERT_EQ(r->put->stored, 0);
    return r->put->n_results ? r->put->results[0]->status : 0;
  }
  if (r->body_case == PCACHEPB__RESPONSE__BODY_IMPORT) {
    ASSERT_EQ(r->import->accepted, 0);
    return r->import->n_problems ? r->import->problems[0]->status : 0;
  }
  return 0;
}

/* Sends req, reads the reply, and checks whether the connection stays. */
static outcome call(int fd, const Pcachepb__Request *req) {
  wire_reply rep;
  outcome o;
  wire_call(fd, req, &rep);
  o.code = reply_code(&rep);
  wire_reply_free(&rep);
  o.closed = !rel_still_open(fd, 50);
  close(fd);
  return o;
}

static outcome raw(int fd, const void *bytes, size_t n) {
  outcome o = {0, 1};
  ASSERT_OK(wire_send_raw(fd, bytes, n));
  o.code = wire_closed_with(fd);
  return o;
}

static outcome put_items(pcache__devkey *dev_key, wire_item *items, size_t n) {
  int fd = wire_open(&env, "bad");
  wire_reply rep;
  outcome o;
  wire_put(fd, dev_key, items, n, &rep);
  o.code = reply_code(&rep);
  wire_reply_free(&rep);
  o.closed = !rel_still_open(fd, 50);
  close(fd);
  return o;
}

/* A put of one item made by make(it) from a valid one. */
static outcome put_one(void (*make)(wire_item *it)) {
  wire_item it;
  outcome o;
  wire_item_make(&it, &key, 1000, 256);
  make(&it);
  o = put_items(&key, &it, 1);
  wire_item_free(&it);
  return o;
}

/* ------------------------------------------------------------------ rows */

static outcome row_before_hello(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats s = PCACHEPB__STATS__INIT;
  req.body_case = PCACHEPB__REQUEST__BODY_STATS;
  req.stats = &s;
  return call(test_raw_connect(&env), &req);
}

static outcome row_garbage(void) {
  static const uint8_t g[] = {0x10, 0, 0, 0, 0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8,
                              0xf7, 0xf6, 0xf5, 0xf4, 0xf3, 0xf2, 0xf1, 0xf0, 0xef, 0xee};
  return raw(wire_open(&env, "bad"), g, 4 + 16);
}

static outcome row_truncated_stall(void) {
  static const uint8_t t[] = {100, 0, 0, 0, 0x0a, 0x02, 0x08, 0x01};
  uint64_t t0 = rel_now_ms();
  outcome o = raw(wire_open(&env, "bad"), t, sizeof t);
  /* Closed by --frame-timeout 1, not at once. */
  ASSERT_GE(rel_now_ms() - t0, 900);
  return o;
}

static outcome row_truncated_eof(void) {
  static const uint8_t t[] = {100, 0, 0, 0, 0x0a, 0x02, 0x08, 0x01};
  int fd = wire_open(&env, "bad");
  outcome o = {0, 1};
  ASSERT_OK(wire_send_raw(fd, t, sizeof t));
  ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
  o.code = wire_closed_with(fd);
  return o;
}

static outcome row_oversize(void) {
  static const uint8_t h[] = {0xf0, 0xff, 0xff, 0xff};
  long before = rel_rss_kb(env.daemon_pid);
  outcome o = raw(wire_open(&env, "bad"), h, sizeof h);
  /* Never allocated: 4 GiB announced, the daemon's RSS did not move. */
  if (!REL_SANITIZED)
    ASSERT_LT(rel_rss_kb(env.daemon_pid) - before, 4096);
  return o;
}

static outcome row_zero_length(void) {
  static const uint8_t z[] = {0, 0, 0, 0};
  return raw(wire_open(&env, "bad"), z, sizeof z);
}

static outcome row_unknown_kind(void) {
  /* Field 99 (length-delimited, empty): a request kind of a newer client. */
  static const uint8_t u[] = {3, 0, 0, 0, 0x9a, 0x06, 0x00};
  int fd = wire_open(&env, "bad");
  wire_reply rep;
  outcome o;
  ASSERT_OK(wire_send_raw(fd, u, sizeof u));
  ASSERT_OK(wire_recv(fd, &rep));
  o.code = rep.resp->status;
  wire_reply_free(&rep);
  /* The connection stays usable. */
  wire_stats(fd, &rep);
  wire_reply_free(&rep);
  o.closed = !rel_still_open(fd, 50);
  close(fd);
  return o;
}

static outcome row_wrong_version(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Hello h = PCACHEPB__HELLO__INIT;
  h.protocol_version = PCACHE_PROTOCOL_VERSION + 41;
  h.app = (char *)"bad";
  req.body_case = PCACHEPB__REQUEST__BODY_HELLO;
  req.hello = &h;
  return call(test_raw_connect(&env), &req);
}

static outcome row_long_app(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Hello h = PCACHEPB__HELLO__INIT;
  char app[301];
  memset(app, 'a', 300);
  app[300] = 0;
  h.protocol_version = PCACHE_PROTOCOL_VERSION;
  h.app = app;
  req.body_case = PCACHEPB__REQUEST__BODY_HELLO;
  req.hello = &h;
  return call(test_raw_connect(&env), &req);
}

static outcome row_malformed_protobuf(void) {
  /* Hello whose submessage claims 5 bytes and has 2. */
  static const uint8_t m[] = {4, 0, 0, 0, 0x0a, 0x05, 0x08, 0x01};
  return raw(wire_open(&env, "bad"), m, sizeof m);
}

static outcome row_bad_device_key(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get g = PCACHEPB__GET__INIT;
  g.device_key = (ProtobufCBinaryData){31, key.bytes};
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &g;
  return call(wire_open(&env, "bad"), &req);
}

static void mk_short_hash(wire_item *it) { it->item.state_hash.len = 15; }

static outcome row_other_device(pcache__devkey *other) {
  /* Valid for other, put for key: a blob another device would crash on. */
  wire_item it;
  outcome o;
  wire_item_make(&it, &key, 1001, 256);
  pcache__blob_write_header(other, it.item.blob.data);
  o = put_items(&key, &it, 1);
  wire_item_free(&it);
  return o;
}

static outcome row_other_vendor(void) {
  pcache__devkey k;
  pcache__devkey_make(pcache__devkey_uuid(&key), 0x10de, pcache__devkey_device(&key), 1, 8, &k);
  return row_other_device(&k);
}

static outcome row_other_device_id(void) {
  pcache__devkey k;
  pcache__devkey_make(pcache__devkey_uuid(&key), pcache__devkey_vendor(&key), 0x2330, 1, 8, &k);
  return row_other_device(&k);
}

static outcome row_other_uuid(void) {
  pcache__devkey k;
  uint8_t uuid[16];
  memcpy(uuid, pcache__devkey_uuid(&key), 16);
  uuid[0] ^= 0x55;
  pcache__devkey_make(uuid, pcache__devkey_vendor(&key), pcache__devkey_device(&key), 1, 8, &k);
  return row_other_device(&k);
}

/* A device the store has never seen, whose only item is refused. */
static outcome row_new_device_refused(void) {
  pcache__devkey k;
  wire_item it;
  outcome o;
  wire_devkey(11, &k);
  wire_item_make(&it, &key, 1002, 256);
  o = put_items(&k, &it, 1);
  wire_item_free(&it);
  return o;
}

static void mk_header_short(wire_item *it) { it->item.blob.len = 20; }
/* 32 bytes (header only) whose headerSize claims 64. */
static void mk_header_only_bad(wire_item *it) {
  it->item.blob.len = 32;
  it->item.blob.data[0] = 64;
}
static void mk_header_version(wire_item *it) { it->item.blob.data[4] = 2; }
static void mk_too_large(wire_item *it) {
  uint8_t *b = wire_blob(&key, MAX_BLOB + 1, 7);
  free(it->item.blob.data);
  it->item.blob.data = b;
  it->item.blob.len = MAX_BLOB + 1;
}
/* The description was altered after hashing (a corrupted body). */
static void mk_hash_mismatch(wire_item *it) { it->item.desc.data[it->item.desc.len - 1] ^= 1; }
static void mk_bad_desc(wire_item *it) {
  memset(it->item.desc.data, 0xff, it->item.desc.len);
  pcache__hash128(it->item.desc.data, it->item.desc.len, &it->hash);
  memcpy(it->item.state_hash.data, it->hash.bytes, 16);
}
/* Module code that does not hash to its name. */
static uint8_t bad_code[16];
static void mk_module_checksum(wire_item *it) {
  memcpy(bad_code, it->module.code.data, 16);
  bad_code[12] ^= 0x20;
  it->module.code.data = bad_code;
}
/* Names SPIR-V the store does not hold, and does not carry it. */
static void mk_missing_module(wire_item *it) {
  pcache__hash mod;
  size_t code_size;
  wire_spirv(5, &code_size, &mod);
  free(it->item.desc.data);
  wire_desc(it->item.kind, 1000, &mod, &it->item.desc.data, &it->item.desc.len, &it->hash);
  memcpy(it->item.state_hash.data, it->hash.bytes, 16);
  it->item.n_modules = 0;
}

static outcome row_short_hash(void) { return put_one(mk_short_hash); }
static outcome row_header_short(void) { return put_one(mk_header_short); }
static outcome row_header_only(void) { return put_one(mk_header_only_bad); }
static outcome row_header_version(void) { return put_one(mk_header_version); }
static outcome row_too_large(void) { return put_one(mk_too_large); }
static outcome row_hash_mismatch(void) { return put_one(mk_hash_mismatch); }
static outcome row_bad_desc(void) { return put_one(mk_bad_desc); }
static outcome row_module_checksum(void) { return put_one(mk_module_checksum); }
static outcome row_missing_module(void) { return put_one(mk_missing_module); }

static outcome row_get_too_many(void) {
  pcache__hash h[MAX_HASHES + 1];
  int fd = wire_open(&env, "bad");
  wire_reply rep;
  outcome o;
  memset(h, 0, sizeof h);
  wire_get(fd, &key, h, MAX_HASHES + 1, &rep);
  o.code = reply_code(&rep);
  wire_reply_free(&rep);
  o.closed = !rel_still_open(fd, 50);
  close(fd);
  return o;
}

static outcome row_put_too_many(void) {
  wire_item it[MAX_HASHES + 1];
  outcome o;
  for (unsigned i = 0; i <= MAX_HASHES; i++)
    wire_item_make(&it[i], &key, 2000 + i, 64);
  o = put_items(&key, it, MAX_HASHES + 1);
  for (unsigned i = 0; i <= MAX_HASHES; i++)
    wire_item_free(&it[i]);
  return o;
}

static outcome row_purge_no_selector(void) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Purge p = PCACHEPB__PURGE__INIT;
  req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
  req.purge = &p;
  return call(wire_open(&env, "bad"), &req);
}

/* An archive of one entry, altered by how: 0 none, 1 wrong checksum field,
 * 2 blob of another device, 3 filed under a device the store does not
 * know, with a blob of ours. */
static void make_archive(int how, uint8_t **ret, size_t *ret_n) {
  pcache__archive_writer *w;
  wire_item it;
  pcache__devkey other;
  pcache__archive_entry e;
  wire_devkey(9, &other);
  wire_item_make(&it, &key, 3000, 256);
  if (how == 2)
    pcache__blob_write_header(&other, it.item.blob.data);
  e = (pcache__archive_entry){.device_key = key,
                              .state_hash = it.hash,
                              .kind = it.item.kind,
                              .app = "bad",
                              .blob = it.item.blob.data,
                              .blob_size = it.item.blob.len,
                              .checksum = pcache__checksum64(it.item.blob.data, it.item.blob.len),
                              .desc = it.item.desc.data,
                              .desc_size = it.item.desc.len};
  if (how == 1)
    e.checksum ^= 1;
  if (how == 3)
    wire_devkey(10, &e.device_key);
  ASSERT_OK(pcache__archive_writer_new(&w));
  ASSERT_OK(pcache__archive_add_module(w, &it.module_hash, it.module.code.data,
                                       it.module.code.len));
  ASSERT_OK(pcache__archive_add_entry(w, &e));
  ASSERT_OK(pcache__archive_finish(w, ret, ret_n));
  pcache__archive_writer_free(w);
  wire_item_free(&it);
}

static outcome import(uint8_t *data, size_t n) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Import im = PCACHEPB__IMPORT__INIT;
  outcome o;
  im.archive = (ProtobufCBinaryData){n, data};
  req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  req.import = &im;
  o = call(wire_open(&env, "bad"), &req);
  pcache__free(data);
  return o;
}

static outcome row_archive_truncated(void) {
  uint8_t *a;
  size_t n;
  make_archive(0, &a, &n);
  return import(a, 10);
}

static outcome row_archive_version(void) {
  uint8_t *a;
  size_t n;
  make_archive(0, &a, &n);
  a[8] = 77; /* the format version after the 8-byte magic */
  return import(a, n);
}

static outcome row_archive_bad_record(void) {
  uint8_t *a;
  size_t n;
  make_archive(0, &a, &n);
  a[n - 40] ^= 0x10; /* inside the entry record: its record checksum fails */
  return import(a, n);
}

static outcome row_archive_entry_checksum(void) {
  uint8_t *a;
  size_t n;
  make_archive(1, &a, &n);
  return import(a, n);
}

static outcome row_archive_other_device(void) {
  uint8_t *a;
  size_t n;
  make_archive(2, &a, &n);
  return import(a, n);
}

static outcome row_archive_new_device(void) {
  uint8_t *a;
  size_t n;
  make_archive(3, &a, &n);
  return import(a, n);
}

typedef struct row {
  const char *name;
  outcome (*run)(void);
  int code;
  int closes;
} row;

static const row rows[] = {
    {"request before Hello", row_before_hello, PCACHE_ENOT_READY, 0},
    {"garbage bytes", row_garbage, PCACHE_EPROTO, 1},
    {"truncated frame, then silence", row_truncated_stall, 0, 1},
    {"truncated frame, then EOF", row_truncated_eof, 0, 1},
    {"oversize announced length (4 GiB)", row_oversize, 0, 1},
    {"zero length", row_zero_length, PCACHE_EEMPTY_FRAME, 1},
    {"unknown message kind", row_unknown_kind, PCACHE_EUNKNOWN_REQUEST, 0},
    {"wrong protocol version", row_wrong_version, PCACHE_EVERSION, 0},
    {"app name over 200 bytes", row_long_app, PCACHE_EBAD_SIZE, 0},
    {"malformed protobuf", row_malformed_protobuf, PCACHE_EPROTO, 1},
    {"device key of 31 bytes", row_bad_device_key, PCACHE_EBAD_KEY, 0},
    {"state hash of 15 bytes", row_short_hash, PCACHE_EBAD_KEY, 0},
    {"blob of another vendor", row_other_vendor, PCACHE_EWRONG_VENDOR, 0},
    {"blob of another device", row_other_device_id, PCACHE_EWRONG_DEVICE, 0},
    {"blob of another driver build (UUID)", row_other_uuid, PCACHE_EWRONG_UUID, 0},
    {"Put to a new device, its only item refused", row_new_device_refused,
     PCACHE_EWRONG_DEVICE, 0},
    {"blob shorter than its 32-byte header", row_header_short, PCACHE_EBLOB_SHORT, 0},
    {"header-only blob claiming headerSize 64", row_header_only, PCACHE_EHEADER_SIZE, 0},
    {"headerVersion 2", row_header_version, PCACHE_EHEADER_VERSION, 0},
    {"blob over --max-blob", row_too_large, PCACHE_EBLOB_TOO_LARGE, 0},
    {"corrupted description (hash mismatch)", row_hash_mismatch, PCACHE_EHASH_MISMATCH, 0},
    {"description that does not parse", row_bad_desc, PCACHE_EBAD_DESC, 0},
    {"module code failing its checksum", row_module_checksum, PCACHE_ECHECKSUM, 0},
    {"module neither stored nor carried", row_missing_module, PCACHE_EMISSING_MODULE, 0},
    {"Get with hashes over the limit", row_get_too_many, PCACHE_ETOO_MANY_HASHES, 0},
    {"Put with items over the limit", row_put_too_many, PCACHE_ETOO_MANY_HASHES, 0},
    {"Purge without a selector", row_purge_no_selector, PCACHE_EPROTO, 0},
    {"archive truncated in its header", row_archive_truncated, PCACHE_EARCHIVE, 0},
    {"archive of an unknown version", row_archive_version, PCACHE_EARCHIVE_VERSION, 0},
    {"archive record failing its checksum", row_archive_bad_record, PCACHE_ECHECKSUM, 0},
    {"archive entry whose blob fails its checksum", row_archive_entry_checksum,
     PCACHE_ECHECKSUM, 0},
    {"archive entry of another device", row_archive_other_device, PCACHE_EWRONG_DEVICE, 0},
    {"archive entry filed under a new device, blob of another",
     row_archive_new_device, PCACHE_EWRONG_DEVICE, 0},
};

int main(void) {
  const char *args[] = {"--max-blob", "64K", "--max-hashes", "16", "--frame-timeout", "1",
                        NULL};
  wire_item base;
  wire_reply rep;
  uint64_t entries, bytes, devices, modules;
  int witness;
  size_t n_rows = sizeof rows / sizeof rows[0];

  test_env_init(&env, "rel-bad-input");
  wire_guard(&env);
  test_daemon_start(&env, args);
  wire_devkey(3, &key);

  /* One good entry, and a client that stays connected throughout. */
  witness = wire_open(&env, "witness");
  wire_item_make(&base, &key, 1, 512);
  wire_put(witness, &key, &base, 1, &rep);
  ASSERT_EQ(rep.resp->put->stored, 1);
  wire_reply_free(&rep);
  rel_stats(witness, &entries, &bytes, &devices, &modules);

  for (size_t i = 0; i < n_rows; i++) {
    const row *r = &rows[i];
    uint64_t e2, b2, d2, m2, t0;
    outcome o;
    fprintf(stderr, "row %zu: %s\n", i + 1, r->name);
    o = r->run();
    if (o.code != r->code)
      TEST_FAIL_("row '%s': status %d (%s), expected %d (%s)", r->name, o.code,
                 pcache_err_name(o.code), r->code, pcache_err_name(r->code));
    if (o.closed != r->closes)
      TEST_FAIL_("row '%s': connection %s, expected it %s", r->name,
                 o.closed ? "closed" : "kept", r->closes ? "closed" : "kept");
    /* Nothing stored. */
    rel_stats(witness, &e2, &b2, &d2, &m2);
    ASSERT_EQ(e2, entries);
    ASSERT_EQ(b2, bytes);
    ASSERT_EQ(d2, devices);
    ASSERT_EQ(m2, modules);
    /* The other client is served right after, and the store verifies. */
    t0 = rel_now_ms();
    wire_get(witness, &key, &base.hash, 1, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    ASSERT_EQ(rep.resp->get->n_blobs, 1);
    wire_reply_free(&rep);
    ASSERT_LT(rel_now_ms() - t0, 1000);
    ASSERT_EQ(rel_verify(witness), 0);
  }
  rel_figure("bad_inputs", "%zu", n_rows);
  printf("bad-input matrix: %zu rows, each refused with its code; nothing stored\n", n_rows);
  wire_item_free(&base);
  close(witness);
  ASSERT_EQ(test_daemon_stop(&env, SIGTERM), 0);
  test_env_cleanup(&env);
  return 0;
}
