/* Replay for a new driver (docs/replay.md), on lavapipe: a store whose
 * entries are filed under an older driver version of lavapipe's device (an
 * export of a cold run, its device key rewritten, imported) is replayed by
 * pcache-replay once a client names the real key, and the app's next run
 * gets a daemon hit for every pipeline. Modes (argv[1]):
 *   (none)   the whole replay, then the warm run
 *   crash    an injected crash (PCACHE_REPLAY_TEST_CRASH) is skipped and
 *            reported, and the rest replayed
 *   kill     the replayer killed with -9 midway, and then pcached, and the
 *            replay resumes to the end; while it runs, the replayer has
 *            nice 19, SCHED_IDLE, the idle I/O class and oom_score_adj 1000
 *   busy     a client that never stops fetching holds the replay to one
 *            item at a time, paced, but not for ever: it finishes
 *   killself one pipeline's build ends the replayer with SIGKILL (a driver
 *            doing so): it is blamed once it did so alone, and the rest
 *            finishes; the replay does not restart replayers for ever
 *   hog      one pipeline's build takes memory past the replayer's limit
 *            (PCACHE_REPLAY_TEST_HOG under PCACHE_REPLAY_MEM_LIMIT_MB): it
 *            is tried again alone twice, then recorded as bad "out of
 *            memory", the rest finishes, and after a kill -9 and restart
 *            of pcached it is not tried again
 *   detect-start  no client names the new key: pcached's own probe of the
 *            drivers at its start (daemon/replay/replay_detect.c) starts the
 *            replay, which finishes, and the app's first run is warm
 *   detect-ctl    the same through pcachectl replay --detect on a running
 *            pcached that did not probe at its start
 *   detect-none   a probe that finds no device (VK_ICD_FILENAMES at
 *            nothing), one that hangs, and one with replay off: pcached
 *            serves, and pcachectl replay --detect says what happened */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client_util.h"
#include "ctl_util.h"
#include "common/alloc.h"
#include "common/clock.h"
#include "common/hash.h"
#include "harness.h"
#include "proto/archive.h"
#include "proto/rpc.h"
#include "test.h"
#include "vk.h"

#define N_GRAPHICS 6
#define N_COMPUTE 2
#define N_PIPELINES (N_GRAPHICS + N_COMPUTE)

static void run(const char *mode, int hits) {
  util_run_set(mode, N_GRAPHICS, N_COMPUTE, (uint32_t)hits);
}

static void rpc(const test_env *env, const Pcachepb__Request *req, Pcachepb__Response__BodyCase b,
                pcache__reply *ret) {
  util_rpc(env, req, b, ret);
}

/* ------------------------------------------------------------- rekey */

typedef struct rekey {
  pcache__archive_writer *w;
} rekey;

static void older(uint8_t *key) {
  pcache__devkey k;
  memcpy(k.bytes, key, PCACHE_DEVKEY_SIZE);
  pcache__put_le32(key + 24, pcache__devkey_driver_version(&k) - 1);
}

static int rk_device(void *ctx, const Pcachepb__DeviceInfo *info) {
  Pcachepb__DeviceInfo copy = *info;
  uint8_t key[PCACHE_DEVKEY_SIZE];
  memcpy(key, info->key.data, PCACHE_DEVKEY_SIZE);
  older(key);
  copy.key.data = key;
  return pcache__archive_add_device(((rekey *)ctx)->w, &copy);
}

static int rk_module(void *ctx, const pcache__hash *h, const void *code, size_t size) {
  return pcache__archive_add_module(((rekey *)ctx)->w, h, code, size);
}

static int rk_entry(void *ctx, const pcache__archive_entry *e) {
  pcache__archive_entry copy = *e;
  older(copy.device_key.bytes);
  return pcache__archive_add_entry(((rekey *)ctx)->w, &copy);
}

static int rk_program(void *ctx, const char *app, const char *exe) {
  return pcache__archive_add_program(((rekey *)ctx)->w, app, exe);
}

static void rekey_bytes(const uint8_t *in, size_t in_size, uint8_t **out, size_t *out_size) {
  rekey rk;
  pcache__archive_visitor v = {rk_device, rk_module, rk_entry, NULL, rk_program};
  ASSERT_OK(pcache__archive_writer_new(&rk.w));
  ASSERT_OK(pcache__archive_read(in, in_size, &v, &rk));
  ASSERT_OK(pcache__archive_finish(rk.w, out, out_size));
  pcache__archive_writer_free(rk.w);
}

/* The store as after a driver update: the cold run's entries filed under
 * the previous driver version of the same device, and nothing else. */
static void make_old_store(const test_env *env, const char *argv0) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Export ex = PCACHEPB__EXPORT__INIT;
  Pcachepb__Import im = PCACHEPB__IMPORT__INIT;
  pcache__reply reply = {0};
  const uint8_t *archive;
  uint8_t *old;
  size_t size, old_size;
  util_run_self(argv0, "cold");
  ASSERT_EQ(util_count_entries(), N_PIPELINES);
  req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
  req.export = &ex;
  rpc(env, &req, PCACHEPB__RESPONSE__BODY_EXPORT, &reply);
  archive = pcache__reply_bytes(&reply, reply.response->export->archive,
                                reply.response->export->archive_offset,
                                reply.response->export->archive_size, &size);
  ASSERT_TRUE(archive != NULL);
  rekey_bytes(archive, size, &old, &old_size);
  pcache__reply_release(&reply);
  util_purge_all(env);
  req.body_case = PCACHEPB__REQUEST__BODY_IMPORT;
  req.import = &im;
  im.archive.data = old;
  im.archive.len = old_size;
  rpc(env, &req, PCACHEPB__RESPONSE__BODY_IMPORT, &reply);
  ASSERT_EQ(reply.response->import->accepted, N_PIPELINES);
  pcache__reply_release(&reply);
  pcache__free(old);
}

/* The replay's progress (the first, and in these tests only, one). */
static Pcachepb__Response *progress(const Pcachepb__ReplayProgress **ret) {
  Pcachepb__Response *resp = util_stats();
  *ret = resp->stats->n_replay ? resp->stats->replay[0] : NULL;
  return resp;
}

/* How long a replay of the test's few pipelines may take before a test
 * calls it stuck: a liveness bound, not a speed goal. Under TSan, on a
 * loaded 2-core machine, the whole replay took over 20 s. */
#define REPLAY_DEADLINE_MS 120000

/* Waits for the replay to finish (REPLAY_DEADLINE_MS at most); returns the response,
 * whose progress is in *ret. */
static Pcachepb__Response *wait_finished(const Pcachepb__ReplayProgress **ret) {
  uint64_t end = util_now_ms() + REPLAY_DEADLINE_MS;
  for (;;) {
    Pcachepb__Response *resp = progress(ret);
    if (*ret && (*ret)->finished)
      return resp;
    pcache__response_free(resp);
    ASSERT_LT(util_now_ms(), end);
    usleep(50000);
  }
}

/* A client that never stops fetching: a Get of one pipeline every 20 ms
 * on the new key (50 a second, far over PCACHE_REPLAY_BUSY_RATE) until
 * the replay finishes, which it must, paced to one item every
 * PCACHE_REPLAY_BUSY_EVERY_MS (every_ms) while the client is busy. */
static void fetch_until_finished(const test_env *env, uint64_t every_ms) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  uint8_t key[PCACHE_DEVKEY_SIZE], hash[16] = {0x42};
  ProtobufCBinaryData hashes[1] = {{sizeof hash, hash}};
  const Pcachepb__ReplayProgress *p;
  Pcachepb__Response *resp;
  uint64_t start = util_now_ms(), end = start + REPLAY_DEADLINE_MS, done0;
  int paused = 0, finished = 0;
  /* The touch run only names the new key: the daemon plans the replay in
   * a writer job of its own, which may come after the touch run exits. */
  while (resp = progress(&p), !p) {
    pcache__response_free(resp);
    ASSERT_LT(util_now_ms(), end);
    usleep(20000);
  }
  memcpy(key, p->new_key.data, PCACHE_DEVKEY_SIZE);
  done0 = p->done;
  pcache__response_free(resp);
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  get.device_key.data = key;
  get.device_key.len = PCACHE_DEVKEY_SIZE;
  get.state_hashes = hashes;
  get.n_state_hashes = 1;
  while (!finished) {
    pcache__reply reply = {0};
    ASSERT_LT(util_now_ms(), end);
    rpc(env, &req, PCACHEPB__RESPONSE__BODY_GET, &reply);
    pcache__reply_release(&reply);
    resp = progress(&p);
    paused |= p->paused && strcmp(p->paused, "foreground") == 0;
    finished = p->finished;
    pcache__response_free(resp);
    usleep(20000);
  }
  ASSERT_TRUE(paused);
  /* Paced: the items left when the client began went one at a time, at
   * most one every every_ms (the first at once). */
  if (done0 + 1 < N_PIPELINES)
    ASSERT_GE(util_now_ms() - start, (N_PIPELINES - done0 - 1) * every_ms * 9 / 10);
}

/* The device record of the new key, which the replayer's uploads made
 * (no app uploaded anything for it), names its deviceUUID as an app's
 * would: pcachectl list shows it, not "-". */
static void expect_device_uuid(const test_env *env, const uint8_t *new_key) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__List list = PCACHEPB__LIST__INIT;
  pcache__reply reply = {0};
  int found = 0;
  req.body_case = PCACHEPB__REQUEST__BODY_LIST;
  req.list = &list;
  rpc(env, &req, PCACHEPB__RESPONSE__BODY_LIST, &reply);
  for (size_t i = 0; i < reply.response->list->n_devices; i++) {
    const Pcachepb__DeviceInfo *info = reply.response->list->devices[i]->info;
    static const uint8_t zero[16];
    if (!info || info->key.len != PCACHE_DEVKEY_SIZE ||
        memcmp(info->key.data, new_key, PCACHE_DEVKEY_SIZE) != 0)
      continue;
    found = 1;
    ASSERT_EQ(info->device_uuid.len, 16);
    ASSERT_TRUE(memcmp(info->device_uuid.data, zero, 16) != 0);
  }
  ASSERT_TRUE(found);
  pcache__reply_release(&reply);
}

/* The state hash of one stored entry, in hex. */
static void some_hash(char out[33]) {
  uint8_t hashes[N_PIPELINES][16];
  ASSERT_EQ(util_list_hashes(hashes, N_PIPELINES), N_PIPELINES);
  pcache__hex(hashes[3], 16, out);
}

/* The lowest state hash stored, in hex: the first item of the app's
 * walk (docs/replay.md, "Order"), so that most of the replay is still to
 * come once it is done with. */
static void lowest_hash(char out[33]) {
  uint8_t hashes[N_PIPELINES][16];
  size_t lowest = 0;
  ASSERT_EQ(util_list_hashes(hashes, N_PIPELINES), N_PIPELINES);
  for (size_t i = 1; i < N_PIPELINES; i++)
    if (memcmp(hashes[i], hashes[lowest], 16) < 0)
      lowest = i;
  pcache__hex(hashes[lowest], 16, out);
}

/* The replayer holds none of pcached's own output: its stdout is
 * /dev/null and its stderr a pipe pcached reads (so an orphan holds no
 * pipe of whoever started pcached). */
static void expect_own_output(uint32_t pid) {
  char path[64], target[256];
  ssize_t n;
  snprintf(path, sizeof path, "/proc/%u/fd/1", pid);
  ASSERT_GT(n = readlink(path, target, sizeof target - 1), 0);
  target[n] = '\0';
  ASSERT_STREQ(target, "/dev/null");
  snprintf(path, sizeof path, "/proc/%u/fd/2", pid);
  ASSERT_GT(n = readlink(path, target, sizeof target - 1), 0);
  target[n] = '\0';
  ASSERT_TRUE(strncmp(target, "socket:", 7) == 0 || strncmp(target, "pipe:", 5) == 0);
}

/* Whether this machine lets a process take what be_nice asks for (a
 * container's seccomp may refuse ioprio_set or SCHED_IDLE): tried in a
 * child. */
static int can_be_nice(void) {
  int status;
  pid_t pid = fork();
  if (pid == 0) {
    struct sched_param sp = {0};
    _exit(setpriority(PRIO_PROCESS, 0, 19) == 0 && sched_setscheduler(0, SCHED_IDLE, &sp) == 0 &&
                  syscall(SYS_ioprio_set, 1, 0, 3 << 13) == 0
              ? 0
              : 1);
  }
  return pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
         WEXITSTATUS(status) == 0;
}

/* The replayer keeps out of the user's way (docs/replay.md, "A good
 * neighbour"): nice 19, SCHED_IDLE, the idle I/O class. */
static void expect_nice(uint32_t pid) {
  char path[64], stat[1024], *p;
  long nice = 0, policy = -1;
  size_t n;
  FILE *f;
  if (!can_be_nice()) {
    fprintf(stderr, "this machine refuses nice 19, SCHED_IDLE or the idle I/O class: "
                    "the replayer's priorities are not checked\n");
    return;
  }
  snprintf(path, sizeof path, "/proc/%u/stat", pid);
  ASSERT_TRUE((f = fopen(path, "r")) != NULL);
  n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = 0;
  /* Fields after the command's closing parenthesis: state is field 3,
   * nice 19, policy 41. */
  ASSERT_TRUE((p = strrchr(stat, ')')) != NULL);
  p += 2;
  for (int field = 3; field <= 41 && p && *p; field++) {
    if (field == 19)
      nice = strtol(p, NULL, 10);
    if (field == 41)
      policy = strtol(p, NULL, 10);
    p = strchr(p, ' ');
    if (p)
      p++;
  }
  ASSERT_EQ(nice, 19);
  ASSERT_EQ(policy, SCHED_IDLE);
  /* ioprio_get(IOPRIO_WHO_PROCESS, pid): class 3 (idle) in the top bits. */
  ASSERT_EQ(syscall(SYS_ioprio_get, 1, (int)pid) >> 13, 3);
}

/* The OOM killer takes the replayer before anything of the user's. */
static void expect_oom_first(uint32_t pid) {
  char path[64];
  int adj = 0;
  FILE *f;
  snprintf(path, sizeof path, "/proc/%u/oom_score_adj", pid);
  ASSERT_TRUE((f = fopen(path, "r")) != NULL);
  ASSERT_EQ(fscanf(f, "%d", &adj), 1);
  fclose(f);
  ASSERT_EQ(adj, 1000);
}

/* Whether the daemon's log has a line with needle in it. */
/* Whether pid runs (a zombie whose parent is gone counts as dead: who
 * reaps it is not the test's to know). */
static int pid_alive(pid_t pid) {
  char path[64], stat[512];
  const char *close_paren;
  FILE *f;
  size_t n;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if (!(f = fopen(path, "r")))
    return 0;
  n = fread(stat, 1, sizeof stat - 1, f);
  fclose(f);
  stat[n] = 0;
  close_paren = strrchr(stat, ')');
  return close_paren && close_paren[1] == ' ' && close_paren[2] != 'Z' && close_paren[2] != 'X';
}

/* How many lines of the daemon's log have needle in them. */
static int log_count(const test_env *env, const char *needle) {
  char line[2048];
  int n = 0;
  FILE *f = fopen(env->log_path, "r");
  ASSERT_TRUE(f != NULL);
  while (fgets(line, sizeof line, f))
    n += strstr(line, needle) != NULL;
  fclose(f);
  return n;
}

static int log_has(const test_env *env, const char *needle) { return log_count(env, needle) > 0; }

/* ----------------------------------------------------------- detect */

/* How long the probe and the job it queues may take before the replay
 * counts as never started (lavapipe's instance takes a tenth of a second;
 * sanitizers and a loaded machine, a few). */
#define DETECT_DEADLINE_MS 30000

static void wait_log(const test_env *env, const char *needle) {
  uint64_t end = util_now_ms() + DETECT_DEADLINE_MS;
  while (!log_has(env, needle)) {
    if (util_now_ms() >= end)
      test_dump_daemon_log(env);
    ASSERT_LT(util_now_ms(), end);
    usleep(20000);
  }
}

/* The store after a driver update, and then no client: the replay starts
 * from pcached's probe alone (at its start, or on pcachectl replay
 * --detect), with the key a client on lavapipe computes, and the app's
 * first run after it gets every pipeline from the daemon. */
static void detect_replays(test_env *env, const char *argv0, const char *mode) {
  const Pcachepb__ReplayProgress *p;
  Pcachepb__Response *resp;
  char new_hex[65];
  uint64_t end;
  /* The harness's daemon does not probe at its start (harness.h). */
  make_old_store(env, argv0);
  resp = progress(&p);
  ASSERT_TRUE(p == NULL); /* the import named no key: nothing to replay yet */
  pcache__response_free(resp);
  if (strcmp(mode, "detect-start") == 0) {
    ASSERT_EQ(test_daemon_stop(env, SIGTERM) & 0x7f, 0);
    unsetenv("PCACHE_REPLAY_DETECT");
    test_daemon_start(env, NULL);
  } else {
    ASSERT_EQ(ctl_run(env, "replay --detect"), 0);
    ASSERT_TRUE(strstr(ctl_out, "installed: llvmpipe") != NULL);
    ASSERT_TRUE(strstr(ctl_out, "1 replay pending") != NULL);
  }
  resp = wait_finished(&p);
  ASSERT_EQ(p->total, N_PIPELINES);
  ASSERT_EQ(p->done, N_PIPELINES);
  ASSERT_EQ(p->failed, 0);
  /* The probe's key is the one the cold run's client named: the old key
   * (that one with its driver version lowered) plus one. */
  ASSERT_EQ(p->old_key.len, PCACHE_DEVKEY_SIZE);
  ASSERT_EQ(p->new_key.len, PCACHE_DEVKEY_SIZE);
  pcache__hex(p->new_key.data, PCACHE_DEVKEY_SIZE, new_hex);
  older(p->new_key.data);
  ASSERT_EQ(memcmp(p->new_key.data, p->old_key.data, PCACHE_DEVKEY_SIZE), 0);
  pcache__response_free(resp);
  ASSERT_TRUE(log_has(env, new_hex)); /* "replay: installed: ... key <new>" */
  if (strcmp(mode, "detect-ctl") == 0)
    ASSERT_TRUE(strstr(ctl_out, new_hex) != NULL);
  end = util_now_ms() + 10000;
  while (util_count_entries() != N_PIPELINES) { /* the old key's evicted */
    ASSERT_LT(util_now_ms(), end);
    usleep(50000);
  }
  util_run_self(argv0, "warm");
}

/* pcachectl replay --detect exits with status, and what it prints (stdout
 * when it succeeds, else stderr) has both needles. */
static void expect_detect(const test_env *env, int status, const char *a, const char *b) {
  const char *said;
  ASSERT_EQ(ctl_run(env, "replay --detect"), status);
  said = status == 0 ? ctl_out : ctl_err;
  ASSERT_TRUE(strstr(said, a) != NULL);
  ASSERT_TRUE(strstr(said, b) != NULL);
}

/* Probes that find nothing, hang, or are off: pcached serves all the same,
 * stops at once, and pcachectl replay --detect says what happened. */
static void detect_nothing(test_env *env) {
  char script[400], marker[420], waiter[420];
  uint8_t *said;
  size_t size;
  uint64_t t0;
  FILE *f;
  unsetenv("PCACHE_REPLAY_DETECT");
  /* No device: not an error. */
  setenv("VK_ICD_FILENAMES", "/nonexistent/pcache-test-icd.json", 1);
  test_daemon_start(env, NULL);
  wait_log(env, "pcache-replay --list-keys found no Vulkan device");
  expect_detect(env, 0, "installed: no Vulkan device", "nothing to replay");
  ASSERT_EQ(test_daemon_stop(env, SIGTERM) & 0x7f, 0);
  unsetenv("VK_ICD_FILENAMES");
  /* A probe that hangs is killed at its deadline, logged, and changes
   * nothing. */
  snprintf(script, sizeof script, "%s/hung-replay", env->root);
  snprintf(marker, sizeof marker, "%s.ran", script);
  ASSERT_TRUE((f = fopen(script, "w")) != NULL);
  fputs("#!/bin/sh\ntouch \"$0.ran\"\nexec sleep 60\n", f);
  ASSERT_EQ(fclose(f), 0);
  ASSERT_EQ(chmod(script, 0755), 0);
  setenv("PCACHE_REPLAYER", script, 1);
  setenv("PCACHE_REPLAY_DETECT_MS", "300", 1);
  test_daemon_start(env, NULL);
  wait_log(env, "--list-keys gave no answer in 300 ms; killed it");
  expect_detect(env, 1, "could not list the installed drivers", "gave no answer in 300 ms");
  ASSERT_EQ(util_count_entries(), 0); /* still serving */
  ASSERT_EQ(test_daemon_stop(env, SIGTERM) & 0x7f, 0);
  /* pcached stops at once with a probe hung and a request waiting for the
   * next: the probe is killed, the request answered. */
  setenv("PCACHE_REPLAY_DETECT_MS", "60000", 1);
  unlink(marker);
  ASSERT_EQ(truncate(env->log_path, 0), 0); /* the log is appended to */
  test_daemon_start(env, NULL);
  for (int i = 0; access(marker, F_OK) != 0; i++) {
    ASSERT_LT(i, 1000);
    usleep(10000);
  }
  snprintf(waiter, sizeof waiter, "%s/waiter.out", env->root);
  ASSERT_EQ(
      ctl_sh("%s --socket %s replay --detect >%s 2>&1 &", ctl_path(), env->socket_path, waiter), 0);
  wait_log(env, "request: replay_start");
  t0 = util_now_ms();
  ASSERT_EQ(test_daemon_stop(env, SIGTERM) & 0x7f, 0);
  ASSERT_LT(util_now_ms() - t0, 5000);
  for (int i = 0; !(said = ctl_read_file(waiter, &size)) || !strstr((char *)said, "stopping");
       i++) {
    free(said);
    ASSERT_LT(i, 500);
    usleep(10000);
  }
  free(said);
  unsetenv("PCACHE_REPLAYER");
  unsetenv("PCACHE_REPLAY_DETECT_MS");
  /* PCACHE_REPLAY=off turns the probe off too, and says how to turn it on. */
  setenv("PCACHE_REPLAY", "off", 1);
  ASSERT_EQ(truncate(env->log_path, 0), 0);
  test_daemon_start(env, NULL);
  expect_detect(env, 1, "replay is off (PCACHE_REPLAY=off", "restart pcached");
  ASSERT_TRUE(!log_has(env, "replay: installed:"));
  unsetenv("PCACHE_REPLAY");
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  const Pcachepb__ReplayProgress *p;
  Pcachepb__Response *resp;
  /* The pipeline a hook makes bad (crash, hog), and the reason expected. */
  char crash[33] = "";
  const char *crash_reason = "crashed";
  int hogged = 0;
  test_env env;
  if (strcmp(mode, "cold") == 0 || strcmp(mode, "touch") == 0 || strcmp(mode, "warm") == 0) {
    run(mode, N_PIPELINES);
    return 0;
  }
  if (strcmp(mode, "warm-crash") == 0) {
    run("warm", N_PIPELINES - 1); /* the crashing pipeline is compiled */
    return 0;
  }
  test_env_init(&env, "client-replay");
  /* The touch run's own requests must not hold the replay back long. */
  setenv("PCACHE_REPLAY_QUIET_MS", "100", 1);
  /* Other tests run beside this one: neither the CPU-pressure throttle nor
   * SCHED_IDLE may hold the replay back for as long as they keep the CPUs
   * busy. The kill mode keeps the priorities, and checks them. */
  setenv("PCACHE_REPLAY_PSI", "100", 1);
  if (strcmp(mode, "kill") != 0)
    setenv("PCACHE_REPLAY_TEST_PRIORITY", "normal", 1);
  setenv("PCACHE_REPLAY_THREADS", strcmp(mode, "kill") == 0 ? "1" : "2", 1);
  if (strcmp(mode, "kill") == 0)
    setenv("PCACHE_REPLAY_TEST_DELAY_MS", "150", 1);
  if (strcmp(mode, "busy") == 0) {
    setenv("PCACHE_REPLAY_QUIET_MS", "500", 1);
    setenv("PCACHE_REPLAY_BUSY_EVERY_MS", "200", 1);
  }
  if (strcmp(mode, "hog") == 0) {
    /* The replayer on lavapipe starts at 90-100 MiB of VmData (what the
     * limit counts; 66-70 MiB resident): this leaves it 280 MiB to build
     * in. One thread, paced, so that the restart below comes mid-replay. */
    setenv("PCACHE_REPLAY_MEM_LIMIT_MB", "384", 1);
    setenv("PCACHE_REPLAY_THREADS", "1", 1);
    setenv("PCACHE_REPLAY_TEST_DELAY_MS", "400", 1);
  }
  test_daemon_start(&env, NULL);
  if (strncmp(mode, "detect-", 7) == 0) {
    if (strcmp(mode, "detect-none") == 0) {
      ASSERT_EQ(test_daemon_stop(&env, SIGTERM) & 0x7f, 0);
      detect_nothing(&env);
    } else {
      detect_replays(&env, argv[0], mode);
    }
    test_env_cleanup(&env);
    return 0;
  }
  make_old_store(&env, argv[0]);
  if (strcmp(mode, "crash") == 0) {
    /* The replayer inherits pcached's environment: restart it with the
     * hook set for one of the stored pipelines. */
    some_hash(crash);
    setenv("PCACHE_REPLAY_TEST_CRASH", crash, 1);
    ASSERT_EQ(test_daemon_stop(&env, SIGTERM) & 0x7f, 0);
    test_daemon_start(&env, NULL);
  }
  if (strcmp(mode, "killself") == 0) {
    /* A driver that ends its process with SIGKILL on one pipeline: struck
     * like a memory failure, blamed once it did it alone twice, and the
     * replay finishes instead of restarting replayers for ever. */
    lowest_hash(crash);
    crash_reason = "killed (signal 9) while building it";
    setenv("PCACHE_REPLAY_TEST_KILLSELF", crash, 1);
    ASSERT_EQ(test_daemon_stop(&env, SIGTERM) & 0x7f, 0);
    test_daemon_start(&env, NULL);
  }
  if (strcmp(mode, "hog") == 0) {
    lowest_hash(crash);
    crash_reason = "out of memory (limit 384 MiB)";
    setenv("PCACHE_REPLAY_TEST_HOG", crash, 1);
    ASSERT_EQ(test_daemon_stop(&env, SIGTERM) & 0x7f, 0);
    test_daemon_start(&env, NULL);
  }
  if (strcmp(mode, "orphan") == 0) {
    /* A replayer hung in its driver (the test hook) when pcached is killed
     * -9 does not live on: the kernel kills it with its parent. */
    char hang[33];
    pid_t pid;
    some_hash(hang);
    setenv("PCACHE_REPLAY_TEST_HANG", hang, 1);
    ASSERT_EQ(test_daemon_stop(&env, SIGTERM) & 0x7f, 0);
    test_daemon_start(&env, NULL);
    util_run_self(argv[0], "touch");
    uint64_t end = util_now_ms() + REPLAY_DEADLINE_MS;
    for (;;) {
      /* Everything built but the hung one and, when there was one left
       * to hand out, the one its thread claimed while starting it (held
       * until the hang limit kills the replayer, then handed out again). */
      resp = progress(&p);
      if (p && p->running && p->replayer_pid && p->done + 2 >= N_PIPELINES)
        break;
      pcache__response_free(resp);
      ASSERT_LT(util_now_ms(), end);
      usleep(20000);
    }
    pid = (pid_t)p->replayer_pid;
    pcache__response_free(resp);
    for (int i = 0; !log_has(&env, "PCACHE_REPLAY_TEST_HANG matches"); i++) {
      ASSERT_LT(i, 1000); /* it has nothing else left to do */
      usleep(10000);
    }
    ASSERT_EQ(test_daemon_stop(&env, SIGKILL) & 0x7f, SIGKILL);
    for (int i = 0; pid_alive(pid); i++) {
      ASSERT_LT(i, 500); /* 5 s */
      usleep(10000);
    }
    test_env_cleanup(&env);
    return 0;
  }
  util_run_self(argv[0], "touch");

  if (strcmp(mode, "kill") == 0) {
    uint64_t end = util_now_ms() + REPLAY_DEADLINE_MS;
    /* Midway: kill -9 the replayer, then pcached itself. */
    for (;;) {
      resp = progress(&p);
      if (p && p->running && p->done >= 2 && p->replayer_pid)
        break;
      pcache__response_free(resp);
      ASSERT_LT(util_now_ms(), end);
      usleep(20000);
    }
    ASSERT_LT(p->done, N_PIPELINES);
    expect_own_output(p->replayer_pid);
    expect_nice(p->replayer_pid);
    expect_oom_first(p->replayer_pid);
    /* The checked priorities stay with this pcached's replayers; the one
     * started next runs at the test's, so that it gets the CPU beside
     * other tests. */
    setenv("PCACHE_REPLAY_TEST_PRIORITY", "normal", 1);
    ASSERT_EQ(kill((pid_t)p->replayer_pid, SIGKILL), 0);
    pcache__response_free(resp);
    for (;;) { /* a new replayer, after the kill */
      resp = progress(&p);
      if (p && p->restarts >= 1 && p->running)
        break;
      pcache__response_free(resp);
      ASSERT_LT(util_now_ms(), end);
      usleep(20000);
    }
    ASSERT_TRUE(!p->finished);
    pcache__response_free(resp);
    ASSERT_EQ(test_daemon_stop(&env, SIGKILL) & 0x7f, SIGKILL);
    /* The record survives: the restarted daemon takes the replay up. */
    test_daemon_start(&env, NULL);
  }

  if (strcmp(mode, "hog") == 0) {
    uint64_t end = util_now_ms() + REPLAY_DEADLINE_MS;
    /* Until its bad record is in the store (status reads it from there),
     * or the replay finished without one. */
    for (;;) {
      resp = progress(&p);
      if (p && (p->n_failures || p->finished))
        break;
      pcache__response_free(resp);
      ASSERT_LT(util_now_ms(), end);
      usleep(20000);
    }
    ASSERT_EQ(p->n_failures, 1);
    ASSERT_TRUE(!p->finished);
    ASSERT_EQ(p->failed, 1);
    pcache__response_free(resp);
    /* Its first build had another item out beside it (the one its thread
     * claimed meanwhile): not to blame, it went out again alone, twice
     * (PCD_REPLAY_OOM_RETRIES), and the kernel's limit stopped it each
     * time (the replayer's crash handler says so, and exits 5). */
    hogged = log_count(&env, "PCACHE_REPLAY_TEST_HOG matches");
    ASSERT_EQ(hogged, 3);
    ASSERT_EQ(log_count(&env, "PCACHE_REPLAY_TEST_HOG took"), 0);
    ASSERT_EQ(log_count(&env, "a build ran out of memory under the limit"), 3);
    ASSERT_EQ(log_count(&env, "out of memory (limit 384 MiB) alone, 1 of 2 times"), 1);
    /* The record outlives pcached: killed -9 mid-replay and started again,
     * it finishes the rest and never hands that item out again. */
    ASSERT_EQ(test_daemon_stop(&env, SIGKILL) & 0x7f, SIGKILL);
    test_daemon_start(&env, NULL);
  }
  if (strcmp(mode, "busy") == 0)
    fetch_until_finished(&env, 200);
  resp = wait_finished(&p);
  ASSERT_EQ(p->total, N_PIPELINES);
  if (crash[0]) {
    char hex[33];
    ASSERT_EQ(p->failed, 1);
    ASSERT_EQ(p->done, N_PIPELINES - 1);
    ASSERT_EQ(p->n_failures, 1);
    pcache__hex(p->failures[0]->state_hash.data, 16, hex);
    ASSERT_STREQ(hex, crash);
    ASSERT_TRUE(strncmp(p->failures[0]->reason, crash_reason, strlen(crash_reason)) == 0);
    if (hogged) {
      char expr[256];
      ASSERT_EQ(log_count(&env, "PCACHE_REPLAY_TEST_HOG matches"), hogged);
      /* What a user sees: the failure and its reason in pcachectl status. */
      snprintf(expr, sizeof expr,
               "d[\"replay\"][0][\"failed\"] == 1 and d[\"replay\"][0][\"failures\"] == "
               "[{\"state_hash\": \"%s\", \"reason\": \"%s\"}]",
               crash, crash_reason);
      ctl_json_check(&env, 0, "status", expr);
    } else {
      /* The replayer's stderr reaches pcached's log (replay_supervise.c). */
      ASSERT_TRUE(log_has(&env, strcmp(mode, "killself") == 0
                                    ? "pcache-replay: replay: PCACHE_REPLAY_TEST_KILLSELF matches"
                                    : "pcache-replay: replay: PCACHE_REPLAY_TEST_CRASH matches"));
    }
  } else {
    ASSERT_EQ(p->failed, 0);
    ASSERT_EQ(p->done, N_PIPELINES);
  }
  expect_device_uuid(&env, p->new_key.data);
  pcache__response_free(resp);
  /* The old key's entries go once the new key is warm (a job after the
   * one that finished the replay). */
  {
    size_t want = crash[0] ? N_PIPELINES - 1 : N_PIPELINES;
    uint64_t end = util_now_ms() + 10000;
    while (util_count_entries() != want) {
      ASSERT_LT(util_now_ms(), end);
      usleep(50000);
    }
  }
  if (!crash[0]) {
    /* The old key is gone, so there is nothing left to replay: pcachectl
     * says so, and --wait does not show the replay finished above as if
     * it were a new one at "100% done". */
    ASSERT_EQ(ctl_run(&env, "replay --wait"), 0);
    ASSERT_TRUE(strstr(ctl_out, "nothing to replay") != NULL);
    ASSERT_TRUE(strstr(ctl_out, "0 replays pending") == NULL);
    ASSERT_TRUE(strstr(ctl_err, "done") == NULL);
  }
  util_run_self(argv[0], crash[0] ? "warm-crash" : "warm");
  {
    /* The last replayer's closing line, relayed into pcached's log. */
    uint64_t end = util_now_ms() + 10000;
    while (!log_has(&env, "pcache-replay: replay: built")) {
      ASSERT_LT(util_now_ms(), end);
      usleep(50000);
    }
  }
  test_env_cleanup(&env);
  return 0;
}
