#include "ctl_util.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "proto/transport.h"
#include "common/alloc.h"
#include "common/blob.h"
#include "common/clock.h"
#include "test.h"

#ifndef PCACHECTL_PATH
#error "PCACHECTL_PATH must name the pcachectl binary"
#endif

char *ctl_out, *ctl_err;

const char *ctl_path(void) { return PCACHECTL_PATH; }

static test_env *guarded_env;

static void on_fatal(int sig) {
  if (guarded_env && guarded_env->daemon_pid) {
    kill(guarded_env->daemon_pid, SIGKILL);
    test_dump_daemon_log(guarded_env);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

void ctl_start(test_env *env) {
  guarded_env = env;
  signal(SIGABRT, on_fatal);
  signal(SIGTERM, on_fatal);
  test_daemon_start(env, NULL);
}

void ctl_key(uint8_t seed, uint32_t driver_version, pcache__devkey *ret_key) {
  uint8_t uuid[PCACHE_UUID_SIZE];
  memset(uuid, seed, sizeof uuid);
  pcache__devkey_make(uuid, 0x10005, 0x100u + seed, driver_version, 8, ret_key);
}

void ctl_uuid_text(uint8_t seed, char out[37]) {
  uint8_t uuid[PCACHE_UUID_SIZE];
  memset(uuid, seed, sizeof uuid);
  pcache__uuid_format(uuid, out);
}

void ctl_spirv(uint32_t n, uint32_t out[CTL_SPIRV_WORDS]) {
  out[0] = 0x07230203; /* magic */
  out[1] = 0x00010000; /* version 1.0 */
  out[2] = 0x000d0000; /* generator */
  out[3] = 16 + n;     /* bound: what makes it unique */
  out[4] = 0;
}

size_t ctl_desc(uint32_t kind, uint32_t n, uint8_t out[CTL_DESC_MAX]) {
  Pcachepb__PipelineDesc desc = PCACHEPB__PIPELINE_DESC__INIT;
  Pcachepb__ShaderStageDesc stage = PCACHEPB__SHADER_STAGE_DESC__INIT, *stages[1] = {&stage};
  Pcachepb__ShaderModuleDesc module = PCACHEPB__SHADER_MODULE_DESC__INIT;
  uint32_t spirv[CTL_SPIRV_WORDS];
  pcache__hash hash;
  ctl_spirv(n, spirv);
  pcache__hash128(spirv, sizeof spirv, &hash);
  module.spirv_hash.data = hash.bytes;
  module.spirv_hash.len = PCACHE_HASH_SIZE;
  stage.stage = kind == 2 ? 0x20 : 0x1; /* COMPUTE_BIT : VERTEX_BIT */
  stage.module = &module;
  stage.entry_point = (char *)"main";
  desc.format_version = 1;
  desc.kind = (Pcachepb__EntryKind)kind;
  desc.n_stages = 1;
  desc.stages = stages;
  ASSERT_LE(pcachepb__pipeline_desc__get_packed_size(&desc), CTL_DESC_MAX);
  return pcachepb__pipeline_desc__pack(&desc, out);
}

void ctl_archive_add(pcache__archive_writer *w, const pcache__devkey *key,
                     const pcache__devkey *blob_key, uint32_t kind, uint32_t n, const char *app,
                     uint64_t created, uint64_t last_used) {
  uint8_t desc[CTL_DESC_MAX], blob[64];
  uint32_t spirv[CTL_SPIRV_WORDS];
  pcache__hash module_hash;
  pcache__archive_entry e;
  ctl_spirv(n, spirv);
  pcache__hash128(spirv, sizeof spirv, &module_hash);
  ASSERT_OK(pcache__archive_add_module(w, &module_hash, spirv, sizeof spirv));
  memset(&e, 0, sizeof e);
  e.device_key = *key;
  e.desc = desc;
  e.desc_size = ctl_desc(kind, n, desc);
  pcache__hash128(desc, e.desc_size, &e.state_hash);
  ctl_blob(blob_key, n, blob, sizeof blob);
  e.blob = blob;
  e.blob_size = sizeof blob;
  e.checksum = pcache__checksum64(blob, sizeof blob);
  e.kind = kind;
  e.app = app;
  e.created = created;
  e.last_used = last_used;
  e.hits = 3;
  e.compile_ns = 2000000;
  ASSERT_OK(pcache__archive_add_entry(w, &e));
}

void ctl_state_hash(uint32_t kind, uint32_t n, pcache__hash *ret_hash) {
  uint8_t desc[CTL_DESC_MAX];
  size_t size = ctl_desc(kind, n, desc);
  pcache__hash128(desc, size, ret_hash);
}

void ctl_blob(const pcache__devkey *key, uint32_t n, uint8_t *out, size_t size) {
  ASSERT_GE(size, PCACHE_BLOB_HEADER_SIZE);
  pcache__blob_write_header(key, out);
  for (size_t i = PCACHE_BLOB_HEADER_SIZE; i < size; i++)
    out[i] = (uint8_t)(n * 31 + i);
}

void ctl_put(const test_env *env, const pcache__devkey *key, const char *device_name,
             const char *app, uint32_t kind, uint32_t first, uint32_t count) {
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  info.name = (char *)device_name;
  ctl_put_info(env, key, &info, app, kind, first, count);
}

void ctl_put_info(const test_env *env, const pcache__devkey *key,
                  const Pcachepb__DeviceInfo *device, const char *app, uint32_t kind,
                  uint32_t first, uint32_t count) {
  pcache__transport *t = NULL;
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Put put = PCACHEPB__PUT__INIT;
  Pcachepb__DeviceInfo info = *device;
  Pcachepb__PutItem *items = calloc(count, sizeof *items);
  Pcachepb__PutItem **item_ptrs = calloc(count, sizeof *item_ptrs);
  uint8_t(*blobs)[96] = calloc(count, sizeof *blobs);
  uint8_t(*descs)[CTL_DESC_MAX] = calloc(count, sizeof *descs);
  uint32_t(*spirv)[CTL_SPIRV_WORDS] = calloc(count, sizeof *spirv);
  pcache__hash *module_hashes = calloc(count, sizeof *module_hashes);
  Pcachepb__Module *modules = calloc(count, sizeof *modules);
  Pcachepb__Module **module_ptrs = calloc(count, sizeof *module_ptrs);
  pcache__hash *hashes = calloc(count, sizeof *hashes);
  pcache__reply reply = {0};
  int r;
  ASSERT_TRUE(items && item_ptrs && blobs && descs && hashes && spirv && module_hashes &&
              modules && module_ptrs);

  ASSERT_OK(pcache__transport_open(env->socket_path, app, 5000, &t, NULL));
  info.key.data = (uint8_t *)key->bytes;
  info.key.len = PCACHE_DEVKEY_SIZE;
  put.device = &info;
  put.app = (char *)app;
  for (uint32_t i = 0; i < count; i++) {
    Pcachepb__PutItem init = PCACHEPB__PUT_ITEM__INIT;
    Pcachepb__Module module_init = PCACHEPB__MODULE__INIT;
    size_t desc_size = ctl_desc(kind, first + i, descs[i]);
    items[i] = init;
    pcache__hash128(descs[i], desc_size, &hashes[i]);
    ctl_blob(key, first + i, blobs[i], sizeof blobs[i]);
    items[i].state_hash.data = hashes[i].bytes;
    items[i].state_hash.len = PCACHE_HASH_SIZE;
    items[i].kind = (Pcachepb__EntryKind)kind;
    items[i].blob.data = blobs[i];
    items[i].blob.len = sizeof blobs[i];
    items[i].desc.data = descs[i];
    items[i].desc.len = desc_size;
    items[i].compile_ns = 1000000u + i;
    ctl_spirv(first + i, spirv[i]);
    pcache__hash128(spirv[i], sizeof spirv[i], &module_hashes[i]);
    modules[i] = module_init;
    modules[i].hash.data = module_hashes[i].bytes;
    modules[i].hash.len = PCACHE_HASH_SIZE;
    modules[i].code.data = (uint8_t *)spirv[i];
    modules[i].code.len = sizeof spirv[i];
    module_ptrs[i] = &modules[i];
    items[i].n_modules = 1;
    items[i].modules = &module_ptrs[i];
    item_ptrs[i] = &items[i];
  }
  put.n_items = count;
  put.items = item_ptrs;
  request.body_case = PCACHEPB__REQUEST__BODY_PUT;
  request.put = &put;
  r = pcache__transport_rpc(t, &request, PCACHEPB__RESPONSE__BODY_PUT, pcache__mono_ms() + 5000,
                            &reply);
  if (r < 0)
    TEST_FAIL_("put failed: %s (%s)", pcache_err_name(r), pcache__reply_why(&reply, r));
  for (size_t i = 0; i < reply.response->put->n_results; i++)
    if (reply.response->put->results[i]->status != 0)
      TEST_FAIL_("put item %zu refused: %s (%s)", i,
                 pcache_err_name(reply.response->put->results[i]->status),
                 reply.response->put->results[i]->message);
  ASSERT_EQ(reply.response->put->stored, count);
  pcache__reply_release(&reply);
  pcache__transport_close(t);
  free(items);
  free(item_ptrs);
  free(blobs);
  free(descs);
  free(hashes);
  free(spirv);
  free(module_hashes);
  free(modules);
  free(module_ptrs);
}

uint8_t *ctl_read_file(const char *path, size_t *ret_size) {
  FILE *f = fopen(path, "rb");
  uint8_t *data;
  long size;
  if (!f)
    TEST_FAIL_("open %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  size = ftell(f);
  fseek(f, 0, SEEK_SET);
  data = malloc((size_t)size + 1);
  ASSERT_TRUE(data != NULL);
  ASSERT_EQ(fread(data, 1, (size_t)size, f), (size_t)size);
  data[size] = 0;
  fclose(f);
  *ret_size = (size_t)size;
  return data;
}

void ctl_write_file(const char *path, const void *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f)
    TEST_FAIL_("create %s: %s", path, strerror(errno));
  ASSERT_EQ(fwrite(data, 1, size, f), size);
  ASSERT_EQ(fclose(f), 0);
}

static int wait_status(int status) {
  if (status == -1)
    TEST_FAIL_("system: %s", strerror(errno));
  if (WIFSIGNALED(status))
    return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int ctl_sh(const char *fmt, ...) {
  char cmd[8192];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(cmd, sizeof cmd, fmt, ap);
  va_end(ap);
  return wait_status(system(cmd));
}

int ctl_run(const test_env *env, const char *fmt, ...) {
  char args[4096], cmd[8192], out_path[400], err_path[400];
  size_t size;
  va_list ap;
  int status;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  snprintf(out_path, sizeof out_path, "%s/ctl.out", env->root);
  snprintf(err_path, sizeof err_path, "%s/ctl.err", env->root);
  /* Redirections first, so args may redirect stdin or stdout again. */
  snprintf(cmd, sizeof cmd, "'%s' --socket '%s' </dev/null >'%s' 2>'%s' %s", ctl_path(),
           env->socket_path, out_path, err_path, args);
  status = wait_status(system(cmd));
  free(ctl_out);
  free(ctl_err);
  ctl_out = (char *)ctl_read_file(out_path, &size);
  ctl_err = (char *)ctl_read_file(err_path, &size);
  fprintf(stderr, "$ pcachectl %s -> %d\n%s%s", args, status, ctl_out, ctl_err);
  return status;
}

void ctl_json_check(const test_env *env, int status, const char *args, const char *expr) {
  char path[400];
  ASSERT_EQ(ctl_run(env, "--json %s", args), status);
  snprintf(path, sizeof path, "%s/doc.json", env->root);
  ctl_write_file(path, ctl_out, strlen(ctl_out));
  ASSERT_EQ(ctl_sh("python3 -m json.tool '%s' >/dev/null", path), 0);
  if (expr &&
      ctl_sh("python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if (%s) "
             "else 1)' '%s'",
             expr, path) != 0)
    TEST_FAIL_("pcachectl --json %s: %s does not hold", args, expr);
}

size_t ctl_count(const char *haystack, const char *needle) {
  size_t n = 0, len = strlen(needle);
  for (const char *p = strstr(haystack, needle); p; p = strstr(p + len, needle))
    n++;
  return n;
}
