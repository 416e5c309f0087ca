#include "bench_entry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "bench_util.h"
#include "common/blob.h"
#include "common/clock.h"
#include "common/paths.h"

void bench_entry_devkey(pcache__devkey *ret_key) {
  static const uint8_t uuid[PCACHE_UUID_SIZE] = "pcache-bench-dev";
  pcache__devkey_make(uuid, 0xbe4c, 0x0001, 1, (uint32_t)sizeof(void *), ret_key);
}

/* A minimal SPIR-V module (header only): the module every crafted
 * description names. The daemon requires a description's code, so each
 * Put carries it. */
static const uint32_t bench_spirv[5] = {0x07230203, 0x00010000, 0, 1, 0};

static const pcache__hash *bench_spirv_hash(void) {
  static pcache__hash h;
  static int done;
  if (!done) {
    pcache__hash128(bench_spirv, sizeof bench_spirv, &h);
    done = 1;
  }
  return &h;
}

size_t bench_entry_desc(uint64_t index, uint8_t buf[BENCH_DESC_MAX]) {
  /* One vertex stage naming the module, and subpass carrying the index
   * so that every entry has its own state hash. */
  Pcachepb__PipelineDesc desc = PCACHEPB__PIPELINE_DESC__INIT;
  Pcachepb__ShaderStageDesc stage = PCACHEPB__SHADER_STAGE_DESC__INIT;
  Pcachepb__ShaderModuleDesc module = PCACHEPB__SHADER_MODULE_DESC__INIT;
  Pcachepb__ShaderStageDesc *stages[1] = {&stage};

  module.spirv_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, (uint8_t *)bench_spirv_hash()->bytes};
  stage.stage = 1; /* VK_SHADER_STAGE_VERTEX_BIT */
  stage.module = &module;
  stage.entry_point = (char *)"main";
  desc.format_version = 1;
  desc.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS;
  desc.n_stages = 1;
  desc.stages = stages;
  desc.subpass = (uint32_t)index + 1;
  if (pcachepb__pipeline_desc__get_packed_size(&desc) > BENCH_DESC_MAX)
    bench_die("crafted description too large");
  return pcachepb__pipeline_desc__pack(&desc, buf);
}

void bench_entry_hash(uint64_t index, pcache__hash *ret_hash) {
  uint8_t desc[BENCH_DESC_MAX];
  size_t n = bench_entry_desc(index, desc);
  pcache__hash128(desc, n, ret_hash);
}

void bench_entry_blob(const pcache__devkey *key, uint64_t index, uint8_t *blob, size_t size) {
  /* xorshift64*: cheap, and blobs that do not compress keep the store
   * honest about its sizes. */
  uint64_t s = index * 0x9e3779b97f4a7c15ull + 1;
  pcache__blob_write_header(key, blob);
  for (size_t i = PCACHE_BLOB_HEADER_SIZE; i < size; i += 8) {
    uint64_t v;
    s ^= s >> 12;
    s ^= s << 25;
    s ^= s >> 27;
    v = s * 0x2545f4914f6cdd1dull;
    memcpy(blob + i, &v, size - i < 8 ? size - i : 8);
  }
}

void bench_put_item_make(bench_put_item *it, const pcache__devkey *key, uint64_t index,
                         size_t blob_size) {
  size_t desc_size = bench_entry_desc(index, it->desc);
  pcache__hash128(it->desc, desc_size, &it->hash);
  it->blob = malloc(blob_size);
  if (!it->blob)
    bench_die("out of memory");
  bench_entry_blob(key, index, it->blob, blob_size);
  pcachepb__put_item__init(&it->item);
  it->item.state_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, it->hash.bytes};
  it->item.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS;
  it->item.blob = (ProtobufCBinaryData){blob_size, it->blob};
  it->item.desc = (ProtobufCBinaryData){desc_size, it->desc};
  it->module_ptr = &it->module;
  pcachepb__module__init(&it->module);
  it->module.hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, (uint8_t *)bench_spirv_hash()->bytes};
  it->module.code = (ProtobufCBinaryData){sizeof bench_spirv, (uint8_t *)bench_spirv};
  it->item.n_modules = 1;
  it->item.modules = &it->module_ptr;
  it->item.compile_ns = 1000000;
}

int bench_put(pcache__transport *t, const pcache__devkey *key, bench_put_item *items, size_t n,
              uint32_t timeout_ms) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Put put = PCACHEPB__PUT__INIT;
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  Pcachepb__PutItem *ptrs[256];
  pcache__reply reply = {0};
  int r;

  if (n > 256)
    return -22;
  for (size_t i = 0; i < n; i++)
    ptrs[i] = &items[i].item;
  dev.key = (ProtobufCBinaryData){PCACHE_DEVKEY_SIZE, (uint8_t *)key->bytes};
  dev.name = (char *)"pcache bench device";
  put.device = &dev;
  put.n_items = n;
  put.items = ptrs;
  req.body_case = PCACHEPB__REQUEST__BODY_PUT;
  req.put = &put;
  r = pcache__transport_rpc(t, &req, PCACHEPB__RESPONSE__BODY_PUT, pcache__mono_ms() + timeout_ms,
                            &reply);
  if (r == 0) {
    const Pcachepb__PutReply *pr = reply.response->put;
    for (size_t i = 0; i < pr->n_results && r == 0; i++)
      r = pr->results[i]->status;
  }
  pcache__reply_release(&reply);
  return r;
}

const char *bench_socket_path(const char *explicit_path) {
  static char path[256];
  int r = pcache__socket_path(explicit_path, path, sizeof path);
  if (r < 0)
    bench_die("no socket path (--socket, PCACHE_SOCKET or XDG_RUNTIME_DIR): %s",
              pcache_strerror(r));
  return path;
}

pcache__transport *bench_connect(const char *socket_path, const char *app) {
  pcache__transport *t = NULL;
  char *msg = NULL;
  int r = pcache__transport_open(socket_path, app, 5000, &t, &msg);
  if (r < 0)
    bench_die("connect %s: %s%s%s", socket_path, pcache_strerror(r), msg ? ": " : "",
              msg ? msg : "");
  return t;
}
