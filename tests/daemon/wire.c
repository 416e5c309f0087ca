#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/blob.h"
#include "common/clock.h"
#include "test.h"

int wire_send_raw(int fd, const void *data, size_t size) {
  const uint8_t *p = data;
  while (size) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    p += n;
    size -= (size_t)n;
  }
  return 0;
}

int wire_send(int fd, const Pcachepb__Request *req) {
  return pcache__rpc_send(fd, req, UINT32_MAX, pcache__mono_ms() + WIRE_TIMEOUT_MS);
}

int wire_recv(int fd, wire_reply *ret) {
  int r = pcache__rpc_recv(fd, PCACHEPB__RESPONSE__BODY__NOT_SET, UINT32_MAX,
                           pcache__mono_ms() + WIRE_TIMEOUT_MS, &ret->reply);
  ret->resp = ret->reply.response;
  ret->fd = ret->reply.bulk ? ret->reply.memfd : -1;
  ret->seals = ret->fd >= 0 ? fcntl(ret->fd, F_GET_SEALS) : 0;
  ret->map = ret->reply.bulk;
  ret->map_size = ret->reply.bulk_size;
  return ret->resp ? 0 : r; /* a refusal is for the test to check */
}

void wire_reply_free(wire_reply *r) {
  pcache__reply_release(&r->reply);
  memset(r, 0, sizeof *r);
  r->fd = -1;
}

int wire_try_call(int fd, const Pcachepb__Request *req, wire_reply *ret) {
  int r = wire_send(fd, req);
  if (r < 0)
    return r;
  return wire_recv(fd, ret);
}

void wire_call(int fd, const Pcachepb__Request *req, wire_reply *ret) {
  ASSERT_OK(wire_try_call(fd, req, ret));
}

int wire_closed_with(int fd) {
  wire_reply rep;
  int status = 0, r;
  struct pollfd p = {fd, POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 5000), 1);
  r = wire_recv(fd, &rep);
  if (r == 0) {
    status = rep.resp->status;
    wire_reply_free(&rep);
    ASSERT_EQ(poll(&p, 1, 5000), 1);
    r = wire_recv(fd, &rep);
  }
  ASSERT_TRUE(r == -EPIPE || r == -ECONNRESET);
  close(fd);
  return status;
}

int wire_open(const test_env *env, const char *app) {
  int fd = test_open(env, app, WIRE_TIMEOUT_MS);
  ASSERT_GE(fd, 0);
  return fd;
}

void wire_devkey(unsigned n, pcache__devkey *ret) {
  uint8_t uuid[16] = "val-test-uuid-00";
  uuid[14] = (uint8_t)('0' + n / 10 % 10);
  uuid[15] = (uint8_t)('0' + n % 10);
  pcache__devkey_make(uuid, 0x10005, 0x0000 + n, 1, 8, ret);
}

static uint8_t wire_spirv_code[8][16];

static void wire_spirv_fill(void) {
  for (unsigned i = 0; i < 8; i++) {
    memcpy(wire_spirv_code[i], "\x03\x02\x23\x07\x00\x00\x01\x00spirv-0", 16);
    wire_spirv_code[i][15] = (uint8_t)('0' + i);
  }
}

const uint8_t *wire_spirv(unsigned n, size_t *ret_size, pcache__hash *ret_hash) {
  /* Eight fixed modules, filled once: tests call this from many threads. */
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, wire_spirv_fill);
  pcache__hash128(wire_spirv_code[n % 8], 16, ret_hash);
  *ret_size = 16;
  return wire_spirv_code[n % 8];
}

void wire_desc(uint32_t kind, uint64_t salt, const pcache__hash *module, uint8_t **ret_desc,
               size_t *ret_size, pcache__hash *ret_hash) {
  Pcachepb__PipelineDesc d = PCACHEPB__PIPELINE_DESC__INIT;
  Pcachepb__ShaderStageDesc st = PCACHEPB__SHADER_STAGE_DESC__INIT, *stp = &st;
  Pcachepb__ShaderModuleDesc md = PCACHEPB__SHADER_MODULE_DESC__INIT;
  size_t n;
  uint8_t *buf;
  md.spirv_hash.data = (uint8_t *)module->bytes;
  md.spirv_hash.len = PCACHE_HASH_SIZE;
  st.stage = kind == PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE ? 0x20 : 0x1;
  st.module = &md;
  st.entry_point = (char *)"main";
  d.format_version = 1;
  d.kind = (Pcachepb__EntryKind)kind;
  d.stages = &stp;
  d.n_stages = 1;
  d.subpass = (uint32_t)salt;
  d.flags = (uint32_t)(salt >> 32);
  n = pcachepb__pipeline_desc__get_packed_size(&d);
  buf = malloc(n);
  pcachepb__pipeline_desc__pack(&d, buf);
  pcache__hash128(buf, n, ret_hash);
  *ret_desc = buf;
  *ret_size = n;
}

uint8_t *wire_blob(const pcache__devkey *key, size_t size, uint8_t pattern) {
  uint8_t *b = malloc(size < 32 ? 32 : size);
  pcache__blob_write_header(key, b);
  for (size_t i = 32; i < size; i++)
    b[i] = (uint8_t)(pattern + i * 7);
  return b;
}

void wire_item_make(wire_item *it, const pcache__devkey *key, uint64_t salt, size_t blob_size) {
  uint8_t *desc;
  size_t desc_size;
  size_t code_size;
  const uint8_t *code = wire_spirv(0, &code_size, &it->module_hash);
  pcachepb__put_item__init(&it->item);
  pcachepb__module__init(&it->module);
  it->module.hash.data = it->module_hash.bytes;
  it->module.hash.len = PCACHE_HASH_SIZE;
  it->module.code.data = (uint8_t *)code;
  it->module.code.len = code_size;
  it->modules[0] = &it->module;
  it->item.modules = it->modules;
  it->item.n_modules = 1;
  wire_desc(PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, salt, &it->module_hash, &desc, &desc_size,
            &it->hash);
  it->item.state_hash.data = malloc(16);
  memcpy(it->item.state_hash.data, it->hash.bytes, 16);
  it->item.state_hash.len = 16;
  it->item.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS;
  it->item.blob.data = wire_blob(key, blob_size, (uint8_t)salt);
  it->item.blob.len = blob_size;
  it->item.desc.data = desc;
  it->item.desc.len = desc_size;
  it->item.compile_ns = 1000 + salt;
}

void wire_item_free(wire_item *it) {
  free(it->item.state_hash.data);
  free(it->item.blob.data);
  free(it->item.desc.data);
}

void wire_put_msg_init(wire_put_msg *m, const pcache__devkey *key, const char *name,
                       wire_item *items, size_t n) {
  pcachepb__request__init(&m->req);
  pcachepb__put__init(&m->put);
  pcachepb__device_info__init(&m->dev);
  m->items = calloc(n + 1, sizeof *m->items);
  ASSERT_TRUE(m->items != NULL);
  for (size_t i = 0; i < n; i++)
    m->items[i] = &items[i].item;
  m->dev.key.data = (uint8_t *)key->bytes;
  m->dev.key.len = PCACHE_DEVKEY_SIZE;
  m->dev.name = (char *)name;
  m->put.device = &m->dev;
  m->put.items = m->items;
  m->put.n_items = n;
  m->req.body_case = PCACHEPB__REQUEST__BODY_PUT;
  m->req.put = &m->put;
}

void wire_put_msg_free(wire_put_msg *m) {
  free(m->items);
  m->items = NULL;
}

void wire_put(int fd, const pcache__devkey *key, wire_item *items, size_t n, wire_reply *ret) {
  wire_put_msg m;
  wire_put_msg_init(&m, key, "test device", items, n);
  wire_call(fd, &m.req, ret);
  wire_put_msg_free(&m);
}

void wire_get(int fd, const pcache__devkey *key, const pcache__hash *hashes, size_t n,
              wire_reply *ret) {
  wire_get_taken(fd, key, hashes, n, 0, ret);
}

void wire_get_taken(int fd, const pcache__devkey *key, const pcache__hash *hashes, size_t n,
                    uint64_t window_taken, wire_reply *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  ProtobufCBinaryData *h = calloc(n + 1, sizeof *h);
  for (size_t i = 0; i < n; i++) {
    h[i].data = (uint8_t *)hashes[i].bytes;
    h[i].len = PCACHE_HASH_SIZE;
  }
  get.device_key.data = (uint8_t *)key->bytes;
  get.device_key.len = PCACHE_DEVKEY_SIZE;
  get.state_hashes = h;
  get.n_state_hashes = n;
  get.window_taken = window_taken;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  wire_call(fd, &req, ret);
  free(h);
}

void wire_stats(int fd, wire_reply *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats s = PCACHEPB__STATS__INIT;
  req.body_case = PCACHEPB__REQUEST__BODY_STATS;
  req.stats = &s;
  wire_call(fd, &req, ret);
  ASSERT_EQ(ret->resp->status, 0);
  ASSERT_EQ(ret->resp->body_case, PCACHEPB__RESPONSE__BODY_STATS);
}

void wire_prefetch(int fd, const pcache__devkey *key, uint32_t max_entries, uint32_t offset,
                   int snapshot, wire_reply *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  pf.device_key.data = (uint8_t *)key->bytes;
  pf.device_key.len = 32;
  pf.max_entries = max_entries;
  pf.offset = offset;
  pf.snapshot = snapshot;
  req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  req.prefetch = &pf;
  wire_call(fd, &req, ret);
  ASSERT_EQ(ret->resp->status, 0);
  ASSERT_EQ(ret->resp->body_case, PCACHEPB__RESPONSE__BODY_PREFETCH);
}

Pcachepb__StatsReply wire_stats_of(int fd) {
  Pcachepb__StatsReply s;
  wire_reply rep;
  wire_stats(fd, &rep);
  s = *rep.resp->stats;
  /* They point into the reply. */
  s.daemon_version = s.data_dir = s.socket_path = NULL;
  wire_reply_free(&rep);
  return s;
}

const uint8_t *wire_blob_data(const wire_reply *r, const Pcachepb__Blob *b, size_t *ret_size) {
  const uint8_t *p =
      pcache__reply_bytes(&r->reply, b->blob, b->blob_offset, b->blob_size, ret_size);
  ASSERT_TRUE(p || !r->map); /* a range outside the memfd */
  return p;
}

static test_env *guarded;

static void on_abort(int sig) {
  (void)sig;
  if (guarded && guarded->daemon_pid > 0) {
    kill(guarded->daemon_pid, SIGKILL);
    test_dump_daemon_log(guarded);
  }
  signal(SIGABRT, SIG_DFL);
}

void wire_guard(test_env *env) {
  guarded = env;
  signal(SIGABRT, on_abort);
}
