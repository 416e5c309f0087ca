/* Writes the seed corpora of the frame, dispatch, archive, blob and binblob fuzz
 * targets (tests/fuzz/corpus/<target>/). Run by hand after a wire change:
 *   build/tests/fuzz/fuzz_make_corpus tests/fuzz/corpus
 * The seeds name the entries fuzz_dispatch puts in its store at start
 * (wire_devkey(1), salts 1..4), so Get and Report reach stored data. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/archive.h"
#include "common/binblob.h"
#include "common/blob.h"
#include "proto/frame.h"
#include "wire.h"

static const char *root;

static void write_file(const char *target, const char *name, const void *data, size_t size) {
  char path[4096];
  FILE *f;
  snprintf(path, sizeof path, "%s/%s", root, target);
  mkdir(path, 0755);
  snprintf(path, sizeof path, "%s/%s/%s", root, target, name);
  if (!(f = fopen(path, "wb")) || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* A request seed: its body for dispatch, body with frame header for frame. */
static void request(const char *name, const Pcachepb__Request *req) {
  uint8_t *buf;
  size_t size;
  if (pcache__request_encode(req, UINT32_MAX, &buf, &size) < 0)
    exit(1);
  write_file("dispatch", name, buf + PCACHE_FRAME_HEADER_SIZE, size - PCACHE_FRAME_HEADER_SIZE);
  write_file("frame", name, buf, size);
  pcache__free(buf);
}

static void response(const char *name, const Pcachepb__Response *resp) {
  uint8_t *buf;
  size_t size;
  if (pcache__response_encode(resp, UINT32_MAX, &buf, &size) < 0)
    exit(1);
  write_file("frame", name, buf, size);
  pcache__free(buf);
}

static void archive(pcache__devkey *key, wire_item *items, size_t n, uint8_t **ret, size_t *ret_n) {
  pcache__archive_writer *w;
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  dev.key.data = key->bytes;
  dev.key.len = sizeof key->bytes;
  dev.name = (char *)"corpus device";
  if (pcache__archive_writer_new(&w) < 0 || pcache__archive_add_device(w, &dev) < 0)
    exit(1);
  if (pcache__archive_add_module(w, &items[0].module_hash, items[0].module.code.data,
                                 items[0].module.code.len) < 0)
    exit(1);
  for (size_t i = 0; i < n; i++) {
    pcache__archive_entry e = {
        .device_key = *key,
        .state_hash = items[i].hash,
        .kind = items[i].item.kind,
        .app = "corpus",
        .blob = items[i].item.blob.data,
        .blob_size = items[i].item.blob.len,
        .checksum = pcache__checksum64(items[i].item.blob.data, items[i].item.blob.len),
        .desc = items[i].item.desc.data,
        .desc_size = items[i].item.desc.len,
        .created = 1,
        .last_used = 2};
    if (pcache__archive_add_entry(w, &e) < 0)
      exit(1);
  }
  if (pcache__archive_finish(w, ret, ret_n) < 0)
    exit(1);
  pcache__archive_writer_free(w);
}

int main(int argc, char **argv) {
  pcache__devkey key, other;
  wire_item items[4];
  Pcachepb__PutItem *ptrs[4];
  ProtobufCBinaryData hashes[3];
  uint8_t *ar, nohash[16] = {0};
  size_t ar_n;
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  root = argv[1];
  wire_devkey(1, &key);
  wire_devkey(2, &other);
  for (int i = 0; i < 4; i++) {
    wire_item_make(&items[i], &key, (uint64_t)i + 1, 256);
    ptrs[i] = &items[i].item;
  }
  for (int i = 0; i < 2; i++)
    hashes[i] = (ProtobufCBinaryData){16, items[i].hash.bytes};
  hashes[2] = (ProtobufCBinaryData){16, nohash};

  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Hello h = PCACHEPB__HELLO__INIT;
    req.body_case = PCACHEPB__REQUEST__BODY_HELLO;
    req.hello = &h;
    h.protocol_version = PCACHE_PROTOCOL_VERSION;
    h.app = (char *)"corpus";
    h.pid = 1;
    h.client_version = (char *)"0.1.0";
    request("hello.bin", &req);
    h.protocol_version = 99;
    request("hello_version.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Get g = PCACHEPB__GET__INIT;
    req.body_case = PCACHEPB__REQUEST__BODY_GET;
    req.get = &g;
    g.device_key = (ProtobufCBinaryData){32, key.bytes};
    g.state_hashes = hashes;
    g.n_state_hashes = 3;
    request("get.bin", &req);
    g.window_taken = 5; /* names a window this connection may not have */
    request("get_window.bin", &req);
    g.window_taken = 0;
    g.device_key.len = 31;
    request("get_badkey.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__ReplyWindow w = PCACHEPB__REPLY_WINDOW__INIT;
    req.body_case = PCACHEPB__REQUEST__BODY_REPLY_WINDOW;
    req.reply_window = &w;
    request("reply_window.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Prefetch p = PCACHEPB__PREFETCH__INIT;
    req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
    req.prefetch = &p;
    p.device_key = (ProtobufCBinaryData){32, key.bytes};
    p.app = (char *)"fuzz";
    request("prefetch.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Put put = PCACHEPB__PUT__INIT;
    Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
    dev.key = (ProtobufCBinaryData){32, key.bytes};
    dev.name = (char *)"corpus device";
    put.device = &dev;
    put.items = ptrs;
    put.n_items = 2;
    req.body_case = PCACHEPB__REQUEST__BODY_PUT;
    req.put = &put;
    request("put.bin", &req);
    /* The same items on another device: every header is wrong. */
    dev.key = (ProtobufCBinaryData){32, other.bytes};
    request("put_wrong_device.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Report rep = PCACHEPB__REPORT__INIT;
    Pcachepb__ReportItem it = PCACHEPB__REPORT_ITEM__INIT, *itp = &it;
    it.state_hash = hashes[1];
    it.reason = PCACHEPB__REPORT_REASON__REPORT_REASON_NO_HIT;
    rep.device_key = (ProtobufCBinaryData){32, key.bytes};
    rep.items = &itp;
    rep.n_items = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_REPORT;
    req.report = &rep;
    request("report.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__List l = PCACHEPB__LIST__INIT;
    l.entries = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_LIST;
    req.list = &l;
    request("list.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Purge p = PCACHEPB__PURGE__INIT;
    p.selector_case = PCACHEPB__PURGE__SELECTOR_STATE_HASH;
    p.state_hash = hashes[2];
    req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
    req.purge = &p;
    request("purge_hash.bin", &req);
  }
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Stats s = PCACHEPB__STATS__INIT;
    Pcachepb__Verify v = PCACHEPB__VERIFY__INIT;
    Pcachepb__Export e = PCACHEPB__EXPORT__INIT;
    req.body_case = PCACHEPB__REQUEST__BODY_STATS;
    req.stats = &s;
    request("stats.bin", &req);
    req.body_case = PCACHEPB__REQUEST__BODY_VERIFY;
    req.verify = &v;
    request("verify.bin", &req);
    req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
    req.export = &e;
    request("export.bin", &req);
  }
  {
    /* What the layer sends at vkDestroyDevice, and pcachectl layer's
     * request. */
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__ClientReport cr = PCACHEPB__CLIENT_REPORT__INIT;
    Pcachepb__UnhashableReason u = PCACHEPB__UNHASHABLE_REASON__INIT, *up = &u;
    Pcachepb__ListClientReports lcr = PCACHEPB__LIST_CLIENT_REPORTS__INIT;
    cr.pid = 4242;
    cr.app = (char *)"corpus app";
    cr.device_key = (ProtobufCBinaryData){32, key.bytes};
    cr.device_name = (char *)"corpus device";
    cr.pipelines = 14;
    cr.hashable = 13;
    cr.compiles = 11;
    cr.uploaded = 11;
    cr.local_hits = 2;
    cr.unhashable = 1;
    u.reason = (char *)"pnext";
    u.stype = 1000999000;
    u.count = 1;
    cr.reasons = &up;
    cr.n_reasons = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_CLIENT_REPORT;
    req.client_report = &cr;
    request("client_report.bin", &req);
    req.body_case = PCACHEPB__REQUEST__BODY_LIST_CLIENT_REPORTS;
    req.list_client_reports = &lcr;
    request("list_client_reports.bin", &req);
  }
  archive(&key, items, 3, &ar, &ar_n);
  write_file("archive", "valid.pca", ar, ar_n);
  write_file("archive", "truncated.pca", ar, ar_n / 2);
  write_file("archive", "header_only.pca", ar, ar_n < 16 ? ar_n : 16);
  {
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Import im = PCACHEPB__IMPORT__INIT;
    im.archive = (ProtobufCBinaryData){ar_n, ar};
    req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
    req.import = &im;
    request("import.bin", &req);
  }
  pcache__free(ar);
  {
    /* An archive of entries made for another device than they claim. */
    pcache__archive_writer *w;
    wire_item bad;
    wire_item_make(&bad, &other, 9, 64);
    memcpy(bad.hash.bytes, items[0].hash.bytes, 16);
    archive(&key, &bad, 1, &ar, &ar_n);
    write_file("archive", "wrong_device.pca", ar, ar_n);
    pcache__free(ar);
    wire_item_free(&bad);
    (void)w;
  }
  {
    Pcachepb__Response resp = PCACHEPB__RESPONSE__INIT;
    Pcachepb__HelloReply h = PCACHEPB__HELLO_REPLY__INIT;
    Pcachepb__GetReply g = PCACHEPB__GET_REPLY__INIT;
    Pcachepb__Blob b = PCACHEPB__BLOB__INIT, *bp = &b;
    resp.body_case = PCACHEPB__RESPONSE__BODY_HELLO;
    resp.hello = &h;
    h.protocol_version = 1;
    h.daemon_version = (char *)"0.1.0";
    response("resp_hello.bin", &resp);
    b.state_hash = hashes[0];
    b.blob = items[0].item.blob;
    g.blobs = &bp;
    g.n_blobs = 1;
    g.missing = &hashes[2];
    g.n_missing = 1;
    resp.body_case = PCACHEPB__RESPONSE__BODY_GET;
    resp.get = &g;
    response("resp_get.bin", &resp);
    resp.body_case = PCACHEPB__RESPONSE__BODY__NOT_SET;
    resp.status = PCACHE_EPROTO;
    resp.message = (char *)"request does not parse";
    response("resp_error.bin", &resp);
  }
  write_file("frame", "zero_length.bin", "\0\0\0\0", 4);
  write_file("frame", "too_large.bin", "\xff\xff\xff\x7f\x0a\x00", 6);
  write_file("frame", "garbage.bin", "\x06\0\0\0\xff\xff\xff\xff\xff\xff", 10);
  {
    uint8_t blob[1 + 64];
    blob[0] = 0;
    memcpy(blob + 1, items[0].item.blob.data, 64);
    write_file("blob", "valid_fixed_key.bin", blob, sizeof blob);
    blob[0] = 1;
    write_file("blob", "valid_own_key.bin", blob, sizeof blob);
    write_file("blob", "short.bin", blob, 20);
    blob[1] = 200; /* headerSize past the end */
    write_file("blob", "header_size.bin", blob, sizeof blob);
    blob[1] = 32;
    blob[5] = 2; /* headerVersion 2 */
    write_file("blob", "header_version.bin", blob, sizeof blob);
  }
  {
    /* Containers for fuzz_binblob's fixed key (byte 0 even) or their own
     * header's (odd): two binaries, then broken ones. */
    static const uint8_t uuid[PCACHE_UUID_SIZE] = "bin-fuzz-uuid-01";
    static const uint8_t k1[4] = "key1", k2[32] = "a binary key of thirty-two bytes", d1[24] = {7},
                         d2[9] = {9};
    pcache__devkey bkey;
    pcache__binblob bb = {.count = 2, .items = {{4, k1, sizeof d1, d1}, {32, k2, sizeof d2, d2}}};
    uint8_t c[1 + 256];
    size_t n = pcache__binblob_size(&bb);
    pcache__devkey_make(uuid, 0x10005, 0, 1, 8, &bkey);
    c[0] = 0;
    pcache__binblob_pack(&bkey, &bb, c + 1);
    write_file("binblob", "two_fixed_key.bin", c, 1 + n);
    c[0] = 1;
    write_file("binblob", "two_own_key.bin", c, 1 + n);
    write_file("binblob", "truncated.bin", c, n);
    c[1 + n] = 0;
    write_file("binblob", "trailing_byte.bin", c, 2 + n);
    c[1 + 44] = 17; /* count past PCACHE_BINBLOB_MAX_BINARIES */
    write_file("binblob", "count_too_large.bin", c, 1 + n);
    c[1 + 44] = 2;
    c[1 + 48] = 33; /* a key longer than VK_MAX_PIPELINE_BINARY_KEY_SIZE_KHR */
    write_file("binblob", "key_too_long.bin", c, 1 + n);
  }
  for (int i = 0; i < 4; i++)
    wire_item_free(&items[i]);
  printf("corpus written under %s\n", root);
  return 0;
}
