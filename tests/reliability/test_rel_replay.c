/* A hostile or broken replayer, and hostile clients, against replay's
 * bookkeeping (docs/replay.md), with no Vulkan: the old key's entries are
 * Put over the wire, a client names a newer driver of the same device,
 * and pcached starts whatever $PCACHE_REPLAYER names. Parts (argv[1]):
 *   storm  the replayer is this program: it claims far more items than
 *          may be in flight and reports none; it must be handed at most
 *          48. A client that is not the replayer claims and reports too:
 *          it is handed nothing and what it reports is ignored. The
 *          replayer never reads its socket again, as one stuck in a
 *          driver: SIGTERM still stops pcached, which ends it.
 *   quit   the replayer exits 0 at once, doing nothing (/bin/true): it
 *          must be restarted with a growing pause and given up on, not
 *          restarted as fast as it can exit, forever (about 8 s). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/hash.h"
#include "harness.h"
#include "rel_util.h"
#include "test.h"

#define N_OLD 60
/* docs/replay.md: "at most 48 items in flight". */
#define MAX_IN_FLIGHT 48
#define STORM_CLAIMS 64

/* Two keys of one device (same vendor, device and ABI), the new one a
 * later driver version: the new supersedes the old. */
static void keys(pcache__devkey *old_key, pcache__devkey *new_key) {
  static const uint8_t uuid_old[16] = "rel-replay-old-0", uuid_new[16] = "rel-replay-new-0";
  pcache__devkey_make(uuid_old, 0x10005, 7, 1, 8, old_key);
  pcache__devkey_make(uuid_new, 0x10005, 7, 2, 8, new_key);
}

/* One ReplayClaim on fd for new_key reporting results; the caller frees
 * the reply. */
static void claim(int fd, const pcache__devkey *new_key, Pcachepb__ReplayResult **results,
                  size_t n_results, wire_reply *ret) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplayClaim c = PCACHEPB__REPLAY_CLAIM__INIT;
  c.new_key.data = (uint8_t *)new_key->bytes;
  c.new_key.len = PCACHE_DEVKEY_SIZE;
  c.results = results;
  c.n_results = n_results;
  req.body_case = PCACHEPB__REQUEST__BODY_REPLAY_CLAIM;
  req.replay_claim = &c;
  wire_call(fd, &req, ret);
  ASSERT_EQ(ret->resp->status, 0);
  ASSERT_EQ(ret->resp->body_case, PCACHEPB__RESPONSE__BODY_REPLAY_CLAIM);
}

/* Where the storm replayer writes its count: beside the socket. */
static void storm_out(const char *socket_path, char *out, size_t size) {
  const char *slash = strrchr(socket_path, '/');
  int dir = slash ? (int)(slash - socket_path) : 1;
  snprintf(out, size, "%.*s/storm-items", dir, slash ? socket_path : ".");
}

/* pcached started this program as its replayer (--socket PATH --device
 * HEX --threads N): claim STORM_CLAIMS times without reporting, write
 * how many items came to storm-items beside the socket, then wait to be
 * stopped. */
static int storm_replayer(int argc, char **argv) {
  test_env env;
  pcache__devkey new_key;
  char out[400], tmp[420], line[32];
  int fd, items = 0, f;
  ASSERT_TRUE(argc >= 5 && strcmp(argv[3], "--device") == 0);
  memset(&env, 0, sizeof env);
  snprintf(env.socket_path, sizeof env.socket_path, "%s", argv[2]);
  storm_out(argv[2], out, sizeof out);
  ASSERT_EQ(pcache__devkey_parse(argv[4], &new_key), 0);
  fd = wire_open(&env, "pcache-replay");
  for (int i = 0; i < STORM_CLAIMS; i++) {
    wire_reply rep;
    claim(fd, &new_key, NULL, 0, &rep);
    items += rep.resp->replay_claim->item != NULL;
    wire_reply_free(&rep);
  }
  snprintf(tmp, sizeof tmp, "%s.tmp", out);
  f = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(f, 0);
  snprintf(line, sizeof line, "%d\n", items);
  ASSERT_EQ(write(f, line, strlen(line)), (ssize_t)strlen(line));
  close(f);
  ASSERT_EQ(rename(tmp, out), 0);
  for (;;)
    pause(); /* pcached ends it (SIGTERM) when it stops */
}

/* Starts pcached with replayer as its replayer, Puts N_OLD entries on the
 * old key and names the new key in a Get: the replay starts. Returns the
 * client's connection. */
static int start_replay(test_env *env, const char *name, const char *replayer) {
  pcache__devkey old_key, new_key;
  wire_item items[N_OLD];
  wire_reply rep;
  pcache__hash h;
  int fd;
  keys(&old_key, &new_key);
  test_env_init(env, name);
  wire_guard(env);
  setenv("PCACHE_REPLAYER", replayer, 1);
  setenv("PCACHE_REPLAY_QUIET_MS", "0", 1);
  test_daemon_start(env, NULL);
  fd = wire_open(env, "rel-replay");
  for (int i = 0; i < N_OLD; i++)
    wire_item_make(&items[i], &old_key, (uint64_t)i + 1, 64);
  wire_put(fd, &old_key, items, N_OLD, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  ASSERT_EQ(rep.resp->put->stored, N_OLD);
  wire_reply_free(&rep);
  for (int i = 0; i < N_OLD; i++)
    wire_item_free(&items[i]);
  memset(h.bytes, 0x5a, sizeof h.bytes);
  wire_get(fd, &new_key, &h, 1, &rep);
  wire_reply_free(&rep);
  return fd;
}

/* Whether process pid has ended (gone, or a zombie nobody reaps). */
static int ended(pid_t pid) {
  char path[64], stat[256];
  const char *state;
  ssize_t n;
  int f;
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  if ((f = open(path, O_RDONLY)) < 0)
    return 1;
  n = read(f, stat, sizeof stat - 1);
  close(f);
  stat[n > 0 ? n : 0] = '\0';
  state = strrchr(stat, ')');
  return !state || state[1] == '\0' || state[2] == 'Z' || state[2] == 'X';
}

/* SIGTERM to pcached: it must exit 0 within 10 s whatever its replayer
 * does, and take the replayer (pid) with it. */
static void stop_daemon(test_env *env, pid_t replayer) {
  uint64_t end = rel_now_ms() + 10000;
  int status;
  ASSERT_EQ(kill(env->daemon_pid, SIGTERM), 0);
  while (waitpid(env->daemon_pid, &status, WNOHANG) == 0) {
    ASSERT_LT(rel_now_ms(), end);
    usleep(20000);
  }
  env->daemon_pid = 0;
  ASSERT_EQ(status, 0);
  while (replayer > 0 && !ended(replayer)) {
    ASSERT_LT(rel_now_ms(), end);
    usleep(20000);
  }
}

/* The replay's progress (the only one; its record is written by a job
 * the Get queued, so it may not be there yet: NULL); the caller frees
 * rep. */
static const Pcachepb__ReplayProgress *progress(int fd, wire_reply *rep) {
  wire_stats(fd, rep);
  ASSERT_LE(rep->resp->stats->n_replay, 1);
  return rep->resp->stats->n_replay ? rep->resp->stats->replay[0] : NULL;
}

static void part_storm(const char *self) {
  test_env env;
  pcache__devkey old_key, new_key;
  char out[400], buf[32] = "";
  Pcachepb__ReplayResult res = PCACHEPB__REPLAY_RESULT__INIT, *results[1] = {&res};
  uint8_t stranger[16];
  const Pcachepb__ReplayProgress *p;
  wire_reply rep;
  uint64_t end;
  pid_t replayer;
  int fd, f;
  keys(&old_key, &new_key);
  fd = start_replay(&env, "rel-replay-storm", self);
  storm_out(env.socket_path, out, sizeof out);
  end = rel_now_ms() + 20000;
  while ((f = open(out, O_RDONLY)) < 0) {
    ASSERT_LT(rel_now_ms(), end);
    usleep(20000);
  }
  ASSERT_GT(read(f, buf, sizeof buf - 1), 0);
  close(f);
  printf("storm: the replayer was handed %d items in %d claims\n", atoi(buf), STORM_CLAIMS);
  ASSERT_EQ(atoi(buf), MAX_IN_FLIGHT);

  /* A client that is not the replayer: no item for it, and its results
   * (for a hash never handed out, and as if for one that was) count for
   * nothing. */
  memset(stranger, 0x11, sizeof stranger);
  res.state_hash.data = stranger;
  res.state_hash.len = sizeof stranger;
  res.status = PCACHE_ECHECKSUM;
  res.message = (char *)"not built";
  claim(fd, &new_key, results, 1, &rep);
  ASSERT_TRUE(rep.resp->replay_claim->item == NULL);
  ASSERT_TRUE(rep.resp->replay_claim->finished);
  wire_reply_free(&rep);
  p = progress(fd, &rep);
  ASSERT_TRUE(p != NULL);
  ASSERT_EQ(p->total, N_OLD);
  ASSERT_EQ(p->done, 0);
  ASSERT_EQ(p->failed, 0);
  ASSERT_TRUE(p->running);
  replayer = (pid_t)p->replayer_pid;
  ASSERT_GT(replayer, 0);
  wire_reply_free(&rep);
  close(fd);
  /* The replayer never reads its socket again (as one stuck in a
   * driver): pcached stops all the same, and ends it. */
  stop_daemon(&env, replayer);
  test_env_cleanup(&env);
}

static void part_quit(void) {
  test_env env;
  const Pcachepb__ReplayProgress *p;
  wire_reply rep;
  uint64_t end, t0 = 0;
  int fd = start_replay(&env, "rel-replay-quit", "/bin/true");
  end = rel_now_ms() + 40000;
  for (;;) {
    p = progress(fd, &rep);
    if (p && !t0)
      t0 = rel_now_ms(); /* its first start is no earlier */
    if (p && p->paused && strstr(p->paused, "keeps failing"))
      break;
    ASSERT_TRUE(!p || p->restarts < 10);
    wire_reply_free(&rep);
    ASSERT_LT(rel_now_ms(), end);
    usleep(50000);
  }
  printf("quit: given up after %llu restarts, %llu ms\n", (unsigned long long)p->restarts,
         (unsigned long long)(rel_now_ms() - t0));
  /* Four pauses, 0.5 + 1 + 2 + 4 s, before the fifth failure in a row:
   * with the pauses skipped it takes a few milliseconds. */
  ASSERT_GT(rel_now_ms() - t0, 5000);
  ASSERT_TRUE(!p->running);
  ASSERT_TRUE(!p->finished);
  wire_reply_free(&rep);
  close(fd);
  stop_daemon(&env, 0);
  test_env_cleanup(&env);
}

int main(int argc, char **argv) {
  char self[4096];
  ssize_t n;
  if (argc > 2 && strcmp(argv[1], "--socket") == 0)
    return storm_replayer(argc, argv);
  n = readlink("/proc/self/exe", self, sizeof self - 1);
  ASSERT_GT(n, 0);
  self[n] = '\0';
  if (rel_part_wanted(argc, argv, "storm"))
    part_storm(self);
  if (rel_part_wanted(argc, argv, "quit"))
    part_quit();
  return 0;
}
