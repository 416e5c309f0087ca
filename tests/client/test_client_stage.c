/* Staged builds on lavapipe (docs/replay.md "Staged builds"): a client
 * Puts descriptions with stage set and no blob of its own, and pcached's
 * replayer builds them for the device, with no client running, into
 * entries the app's next run gets from the daemon and the driver takes.
 * The descriptions are a cold run's, exported and then purged.
 *   (none)  half the set staged, the other half while the first half's
 *           build runs (nothing staged meanwhile is lost), each item a
 *           description alone; pcachectl list names the staged key while
 *           there is one, and none once all is built
 *   seed    every item staged with a seed: the cold run's own blob for
 *           half of them, bytes after a valid header for the others; all
 *           are built, and the replayer says its builds started from them
 *   client  libpcache stages them itself (PCACHE_STAGE=all, as on NVIDIA
 *           by default: docs/client.md "Staging"): a cold run compiles
 *           each as the program would and stages it; the replayer builds
 *           them all
 *   exe     builds under the program's name (docs/replay.md): the cold
 *           run's app is recorded as running as this test binary, in the
 *           store (pcached restarted before it is used); its staged items
 *           are built by a copy of pcache-replay of that name under the
 *           data directory, which status names while it runs; then half
 *           the set staged for a second app whose program has another
 *           name: two replayers, one after the other, and all built
 *   exe-off the same first part with PCACHE_REPLAY_AS_PROGRAM=0: built as
 *           pcache-replay, and no copy made */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client_util.h"
#include "common/alloc.h"
#include "common/bytes.h"
#include "common/clock.h"
#include "ctl_util.h"
#include "harness.h"
#include "proto/archive.h"
#include "proto/rpc.h"
#include "test.h"
#include "vk.h"

#define N_GRAPHICS 6
#define N_COMPUTE 2
#define N_PIPELINES (N_GRAPHICS + N_COMPUTE)
#define MAX_MODULES 8
/* A liveness bound, as test_client_replay's: TSan on a loaded machine. */
#define STAGE_DEADLINE_MS 120000

/* The cold run's pipelines, copied out of its export (set_free). */
typedef struct set {
  Pcachepb__DeviceInfo *device; /* owned, as every pointer below */
  Pcachepb__Module modules[MAX_MODULES], *module_ptrs[MAX_MODULES];
  size_t n_modules;
  pcache__archive_entry entries[N_PIPELINES];
  size_t n_entries;
} set;

/* The reader's record lasts the call: a copy, through its encoding. */
static int on_device(void *ctx, const Pcachepb__DeviceInfo *info) {
  size_t n = pcachepb__device_info__get_packed_size(info);
  uint8_t *buf = malloc(n + 1);
  ASSERT_TRUE(buf != NULL);
  pcachepb__device_info__pack(info, buf);
  ((set *)ctx)->device = pcachepb__device_info__unpack(NULL, n, buf);
  ASSERT_TRUE(((set *)ctx)->device != NULL);
  free(buf);
  return 0;
}

static uint8_t *copy(const void *p, size_t n) {
  uint8_t *c = malloc(n + 1);
  ASSERT_TRUE(c != NULL);
  memcpy(c, p, n);
  return c;
}

static int on_module(void *ctx, const pcache__hash *h, const void *code, size_t size) {
  set *s = ctx;
  Pcachepb__Module *m = &s->modules[s->n_modules];
  ASSERT_LT(s->n_modules, MAX_MODULES);
  pcachepb__module__init(m);
  m->hash.data = copy(h->bytes, PCACHE_HASH_SIZE);
  m->hash.len = PCACHE_HASH_SIZE;
  m->code.data = copy(code, size);
  m->code.len = size;
  s->module_ptrs[s->n_modules++] = m;
  return 0;
}

static int on_entry(void *ctx, const pcache__archive_entry *e) {
  set *s = ctx;
  pcache__archive_entry *kept = &s->entries[s->n_entries];
  ASSERT_LT(s->n_entries, N_PIPELINES);
  *kept = *e;
  kept->app = NULL;
  kept->blob = copy(e->blob, e->blob_size);
  kept->desc = copy(e->desc, e->desc_size);
  s->n_entries++;
  return 0;
}

static void set_free(set *s) {
  for (size_t i = 0; i < s->n_modules; i++) {
    free(s->modules[i].hash.data);
    free(s->modules[i].code.data);
  }
  for (size_t i = 0; i < s->n_entries; i++) {
    free((void *)s->entries[i].blob);
    free((void *)s->entries[i].desc);
  }
  pcachepb__device_info__free_unpacked(s->device, NULL);
}

/* A cold run, its export, and then an empty store. */
static void make_set(const test_env *env, const char *argv0, set *s) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Export ex = PCACHEPB__EXPORT__INIT;
  pcache__archive_visitor v = {on_device, on_module, on_entry, NULL, NULL};
  pcache__reply reply = {0};
  const uint8_t *archive;
  size_t size;
  memset(s, 0, sizeof *s);
  util_run_self(argv0, "cold");
  ASSERT_EQ(util_count_entries(), N_PIPELINES);
  req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
  req.export = &ex;
  util_rpc(env, &req, PCACHEPB__RESPONSE__BODY_EXPORT, &reply);
  archive = pcache__reply_bytes(&reply, reply.response->export->archive,
                                reply.response->export->archive_offset,
                                reply.response->export->archive_size, &size);
  ASSERT_TRUE(archive != NULL);
  ASSERT_OK(pcache__archive_read(archive, size, &v, s));
  pcache__reply_release(&reply);
  ASSERT_EQ(s->n_entries, N_PIPELINES);
  ASSERT_TRUE(s->device != NULL);
  util_purge_all(env);
}

/* seeds: NULL, descriptions alone; else each item's seed (seed_sizes[i]
 * bytes). app: what they are filed under (NULL: util_rpc's own). */
static void stage(const test_env *env, const set *s, size_t first, size_t n, uint8_t *const *seeds,
                  const size_t *seed_sizes, const char *app) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Put put = PCACHEPB__PUT__INIT;
  Pcachepb__PutItem items[N_PIPELINES], *ptrs[N_PIPELINES];
  pcache__reply reply = {0};
  for (size_t i = 0; i < n; i++) {
    const pcache__archive_entry *e = &s->entries[first + i];
    pcachepb__put_item__init(&items[i]);
    items[i].state_hash.data = (uint8_t *)e->state_hash.bytes;
    items[i].state_hash.len = PCACHE_HASH_SIZE;
    items[i].kind = (Pcachepb__EntryKind)e->kind;
    items[i].desc.data = (uint8_t *)e->desc;
    items[i].desc.len = e->desc_size;
    /* Every module of the set: the daemon takes those the description
     * names. */
    items[i].modules = (Pcachepb__Module **)s->module_ptrs;
    items[i].n_modules = s->n_modules;
    if (seeds) {
      items[i].blob.data = seeds[first + i];
      items[i].blob.len = seed_sizes[first + i];
    }
    ptrs[i] = &items[i];
  }
  put.device = s->device;
  put.items = ptrs;
  put.n_items = n;
  put.stage = 1;
  put.app = (char *)(app ? app : "");
  req.body_case = PCACHEPB__REQUEST__BODY_PUT;
  req.put = &put;
  util_rpc(env, &req, PCACHEPB__RESPONSE__BODY_PUT, &reply);
  ASSERT_EQ(reply.response->put->n_results, n);
  for (size_t i = 0; i < n; i++)
    ASSERT_EQ(reply.response->put->results[i]->status, 0);
  ASSERT_EQ(reply.response->put->stored, n);
  pcache__reply_release(&reply);
}

/* The staged replay's progress, when there is one (freed with the
 * returned response). */
static Pcachepb__Response *staged_progress(const Pcachepb__ReplayProgress **ret) {
  Pcachepb__Response *resp = util_stats();
  *ret = NULL;
  for (size_t i = 0; i < resp->stats->n_replay; i++) {
    const Pcachepb__ReplayProgress *p = resp->stats->replay[i];
    if (p->old_key.len == PCACHE_DEVKEY_SIZE &&
        pcache__le32(p->old_key.data + 28) & PCACHE_DEVKEY_ABI_STAGED)
      *ret = p;
  }
  return resp;
}

/* Entries the daemon lists: under the device key, and under its staged
 * key. */
static void count_keys(const test_env *env, const set *s, size_t *ret_built, size_t *ret_staged) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache__devkey key, staged;
  pcache__reply reply = {0};
  memcpy(key.bytes, s->device->key.data, PCACHE_DEVKEY_SIZE);
  pcache__devkey_staged(&key, &staged);
  list.entries = 1;
  req.body_case = PCACHEPB__REQUEST__BODY_LIST;
  req.list = &list;
  util_rpc(env, &req, PCACHEPB__RESPONSE__BODY_LIST, &reply);
  *ret_built = *ret_staged = 0;
  for (size_t i = 0; i < reply.response->list->n_entries; i++) {
    const ProtobufCBinaryData *k = &reply.response->list->entries[i]->device_key;
    ASSERT_EQ(k->len, PCACHE_DEVKEY_SIZE);
    *ret_built += memcmp(k->data, key.bytes, PCACHE_DEVKEY_SIZE) == 0;
    *ret_staged += memcmp(k->data, staged.bytes, PCACHE_DEVKEY_SIZE) == 0;
  }
  pcache__reply_release(&reply);
}

/* Until every pipeline is built for the device and no staged entry is
 * left (each went once built). */
static void wait_built(const test_env *env, const set *s) {
  uint64_t end = util_now_ms() + STAGE_DEADLINE_MS;
  size_t built, staged;
  for (;;) {
    count_keys(env, s, &built, &staged);
    if (built == N_PIPELINES && staged == 0)
      break;
    if (util_now_ms() >= end)
      test_dump_daemon_log(env);
    ASSERT_LT(util_now_ms(), end);
    usleep(50000);
  }
}

/* Lines of the daemon's log from byte `from` on that hold needle. */
/* Staged first for a device this machine does not have (its key sorts
 * before the real one's, so its replay is loaded first), then the set for
 * the real device: the replayer finds no device for the first, which must
 * not hold the second back (it did: every replay waited for a restart). */
static void device_gone(const test_env *env, set *s) {
  Pcachepb__DeviceInfo *real = s->device, gone = *real;
  uint8_t key[PCACHE_DEVKEY_SIZE];
  memcpy(key, real->key.data, PCACHE_DEVKEY_SIZE);
  key[0] = 0;     /* sorts first */
  key[24] ^= 0xff; /* another driver version */
  gone.key.data = key;
  s->device = &gone;
  stage(env, s, 0, N_PIPELINES, NULL, NULL, NULL);
  s->device = real;
  stage(env, s, 0, N_PIPELINES, NULL, NULL, NULL);
  wait_built(env, s);
}

static int log_count(const test_env *env, long from, const char *needle) {
  char line[2048];
  int found = 0;
  FILE *f = fopen(env->log_path, "r");
  ASSERT_TRUE(f != NULL);
  ASSERT_EQ(fseek(f, from, SEEK_SET), 0);
  while (fgets(line, sizeof line, f))
    found += strstr(line, needle) != NULL;
  fclose(f);
  return found;
}

static int log_has(const test_env *env, const char *needle) {
  return log_count(env, 0, needle) > 0;
}

static long log_size(const test_env *env) {
  struct stat st;
  ASSERT_EQ(stat(env->log_path, &st), 0);
  return (long)st.st_size;
}

/* Half staged, the rest while the first half is built. */
static void staged_meanwhile(const test_env *env, const set *s) {
  const Pcachepb__ReplayProgress *p;
  Pcachepb__Response *resp;
  uint64_t end = util_now_ms() + STAGE_DEADLINE_MS;
  size_t half = N_PIPELINES / 2;
  stage(env, s, 0, half, NULL, NULL, NULL);
  ASSERT_EQ(ctl_run(env, "list"), 0);
  ASSERT_TRUE(strstr(ctl_out, "(staged builds for ") != NULL);
  /* One built, and the rest of the half still to come (each build takes
   * PCACHE_REPLAY_TEST_DELAY_MS more). */
  for (;;) {
    resp = staged_progress(&p);
    if (p && p->done >= 1)
      break;
    pcache__response_free(resp);
    ASSERT_LT(util_now_ms(), end);
    usleep(20000);
  }
  ASSERT_TRUE(!p->finished);
  ASSERT_LT(p->done, half);
  pcache__response_free(resp);
  stage(env, s, half, N_PIPELINES - half, NULL, NULL, NULL);
  /* The items staged meanwhile join the replay under way: its total
   * counts them (it stayed at the first half's, and status said more done
   * than there were), and so does its finished record. */
  resp = staged_progress(&p);
  ASSERT_TRUE(p != NULL);
  ASSERT_EQ(p->total, N_PIPELINES);
  pcache__response_free(resp);
  wait_built(env, s);
  resp = staged_progress(&p);
  ASSERT_TRUE(p != NULL && p->finished);
  ASSERT_EQ(p->total, N_PIPELINES);
  ASSERT_EQ(p->done, N_PIPELINES);
  pcache__response_free(resp);
  ASSERT_EQ(ctl_run(env, "list"), 0);
  ASSERT_TRUE(strstr(ctl_out, "staged builds") == NULL);
}

/* Bytes of nothing after a valid header, in an odd item's seed. */
#define GARBAGE 512

/* Every item with a seed: the cold run's blob for the even ones (on
 * lavapipe its header alone: its caches keep no pipeline data), that
 * header and then GARBAGE bytes of nothing for the odd ones. */
static void seeded(const test_env *env, const set *s) {
  uint8_t *seeds[N_PIPELINES];
  size_t sizes[N_PIPELINES];
  for (size_t i = 0; i < N_PIPELINES; i++) {
    const pcache__archive_entry *e = &s->entries[i];
    ASSERT_GE(e->blob_size, 32);
    sizes[i] = i % 2 ? e->blob_size + GARBAGE : e->blob_size;
    seeds[i] = malloc(sizes[i]);
    ASSERT_TRUE(seeds[i] != NULL);
    memcpy(seeds[i], e->blob, e->blob_size);
    for (size_t k = e->blob_size; k < sizes[i]; k++)
      seeds[i][k] = (uint8_t)(k * 131 + i);
  }
  stage(env, s, 0, N_PIPELINES, seeds, sizes, NULL);
  wait_built(env, s);
  for (int i = 0; !log_has(env, "builds started from a seed"); i++) {
    ASSERT_LT(i, 500); /* the replayer's closing lines, relayed */
    usleep(20000);
  }
  for (size_t i = 0; i < N_PIPELINES; i++)
    free(seeds[i]);
}

/* Until the daemon's log, from byte `from` on, has needle (the
 * replayer's lines are relayed as they come). */
static void wait_log(const test_env *env, long from, const char *needle) {
  uint64_t end = util_now_ms() + 10000;
  while (!log_count(env, from, needle)) {
    if (util_now_ms() >= end)
      test_dump_daemon_log(env);
    ASSERT_LT(util_now_ms(), end);
    usleep(20000);
  }
}

/* The copy of pcache-replay pcached made to run as name. */
static void assert_copy(const test_env *env, const char *name, int exists) {
  char path[1024];
  struct stat st;
  snprintf(path, sizeof path, "%s/replayers/%s/%s", env->data_dir, name, name);
  if (!exists) {
    snprintf(path, sizeof path, "%s/replayers", env->data_dir);
    ASSERT_TRUE(stat(path, &st) < 0);
    return;
  }
  ASSERT_EQ(stat(path, &st), 0);
  ASSERT_TRUE(S_ISREG(st.st_mode) && (st.st_mode & S_IXUSR));
  *strrchr(path, '/') = '\0';
  ASSERT_EQ(stat(path, &st), 0);
  ASSERT_EQ(st.st_mode & 0777, 0700);
}

/* Until status shows the staged replay's replayer running; its name. */
static void assert_running_as(const char *name) {
  uint64_t end = util_now_ms() + STAGE_DEADLINE_MS;
  for (;;) {
    const Pcachepb__ReplayProgress *p;
    Pcachepb__Response *resp = staged_progress(&p);
    int seen = p && p->running && p->replayer_name && *p->replayer_name;
    if (seen)
      ASSERT_STREQ(p->replayer_name, name);
    pcache__response_free(resp);
    if (seen)
      return;
    ASSERT_LT(util_now_ms(), end);
    usleep(10000);
  }
}

/* A copy of this test binary named name, in the test's directory: a
 * program of another name. */
static void copy_self(const test_env *env, const char *argv0, const char *name, char *out,
                      size_t size) {
  char buf[65536];
  size_t n;
  FILE *in = fopen(argv0, "rb"), *o;
  snprintf(out, size, "%s/%s", env->root, name);
  o = fopen(out, "wb");
  ASSERT_TRUE(in != NULL && o != NULL);
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    ASSERT_EQ(fwrite(buf, 1, n, o), n);
  fclose(in);
  ASSERT_EQ(fclose(o), 0);
  ASSERT_EQ(chmod(out, 0755), 0);
}

/* Runs the program at path with one argument (util_run_self runs this
 * binary whatever argv[0] says: the executable is what names it). */
static void run_program(const char *path, const char *arg) {
  int status;
  pid_t pid = fork();
  ASSERT_TRUE(pid >= 0);
  if (pid == 0) {
    execl(path, path, arg, (char *)NULL);
    _exit(127);
  }
  while (waitpid(pid, &status, 0) < 0)
    ASSERT_EQ(errno, EINTR);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Builds under the program's name (docs/replay.md). */
static void as_program(test_env *env, const char *argv0, const set *s, int on) {
  const char *slash = strrchr(argv0, '/'), *self = slash ? slash + 1 : argv0;
  char needle[256], other[512];
  const Pcachepb__ReplayProgress *p;
  Pcachepb__Response *resp;
  long from;
  /* The cold run (make_set) named its app from this binary; the record
   * is the store's, not the memory of the pcached that saw it. */
  ASSERT_EQ(test_daemon_stop(env, SIGTERM), 0);
  from = log_size(env);
  test_daemon_start(env, NULL);
  stage(env, s, 0, N_PIPELINES, NULL, NULL, "pcache-client-test");
  snprintf(needle, sizeof needle, "replay: runs as '%s'", on ? self : "pcache-replay");
  if (on)
    assert_running_as(self);
  wait_built(env, s);
  wait_log(env, from, needle);
  snprintf(needle, sizeof needle, "replay: runs as '%s'", self);
  /* One replayer, started under the right name at once. */
  ASSERT_EQ(log_count(env, from, needle), on ? 1 : 0);
  ASSERT_EQ(log_count(env, from, "replay: runs as 'pcache-replay'"), on ? 0 : 1);
  assert_copy(env, self, on);
  if (!on)
    return;
  /* A second app, whose program is a copy of this one named pcx-other
   * (it names the app in its Hello: "touch"), staged while the first
   * app's build runs. */
  util_purge_all(env);
  copy_self(env, argv0, "pcx-other", other, sizeof other);
  setenv("PCACHE_APP_NAME", "app-other", 1);
  run_program(other, "touch");
  unsetenv("PCACHE_APP_NAME");
  from = log_size(env);
  stage(env, s, 0, N_PIPELINES / 2, NULL, NULL, "pcache-client-test");
  stage(env, s, N_PIPELINES / 2, N_PIPELINES - N_PIPELINES / 2, NULL, NULL, "app-other");
  wait_built(env, s);
  wait_log(env, from, "replay: runs as 'pcx-other'");
  /* Each name's replayer in turn (which first depends on when the
   * second Put lands), told to finish when the next item was the other
   * program's; never pcache-replay under its own name. */
  ASSERT_GE(log_count(env, from, needle), 1);
  ASSERT_GE(log_count(env, from, "finished its program's pipelines; the next ones are"), 1);
  ASSERT_EQ(log_count(env, from, "replay: runs as 'pcache-replay'"), 0);
  assert_copy(env, "pcx-other", 1);
  resp = staged_progress(&p);
  ASSERT_TRUE(p != NULL);
  ASSERT_EQ(p->failed, 0);
  pcache__response_free(resp);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  test_env env;
  set s;
  /* The runs of the set: cold compiles all; warm gets every pipeline
   * from the daemon, and the driver takes every blob. */
  if (strcmp(mode, "cold") == 0 || strcmp(mode, "warm") == 0 || strcmp(mode, "staged") == 0 ||
      strcmp(mode, "touch") == 0) {
    util_run_set(mode, N_GRAPHICS, N_COMPUTE, N_PIPELINES);
    return 0;
  }
  test_env_init(&env, "client-stage");
  /* As test_client_replay: other tests beside this one must not hold
   * the builds back. One thread, each build slowed, so that the second
   * half of the set comes while the first is built. */
  setenv("PCACHE_REPLAY_QUIET_MS", "100", 1);
  setenv("PCACHE_REPLAY_PSI", "100", 1);
  setenv("PCACHE_REPLAY_TEST_PRIORITY", "normal", 1);
  setenv("PCACHE_REPLAY_THREADS", "1", 1);
  if (strcmp(mode, "exe-off") == 0)
    setenv("PCACHE_REPLAY_AS_PROGRAM", "0", 1);
  if (strncmp(mode, "exe", 3) == 0)
    setenv("PCACHE_REPLAY_TEST_DELAY_MS", "150", 1);
  else if (strcmp(mode, "seed") != 0)
    setenv("PCACHE_REPLAY_TEST_DELAY_MS", "400", 1);
  test_daemon_start(&env, NULL);
  make_set(&env, argv[0], &s);
  if (strncmp(mode, "exe", 3) == 0) {
    as_program(&env, argv[0], &s, strcmp(mode, "exe") == 0);
  } else if (strcmp(mode, "seed") == 0) {
    seeded(&env, &s);
  } else if (strcmp(mode, "gone") == 0) {
    device_gone(&env, &s);
  } else if (strcmp(mode, "client") == 0) {
    setenv("PCACHE_STAGE", "all", 1);
    util_run_self(argv[0], "staged");
    unsetenv("PCACHE_STAGE");
    wait_built(&env, &s);
  } else {
    staged_meanwhile(&env, &s);
  }
  /* No client ran meanwhile: the builds are the replayer's, and the
   * driver takes every one of them. */
  util_run_self(argv[0], "warm");
  set_free(&s);
  test_env_cleanup(&env);
  return 0;
}
