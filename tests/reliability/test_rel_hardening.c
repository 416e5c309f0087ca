/* Smaller defects of issue 12, section 7 (docs/RELIABILITY.md 12.7), each
 * a part that can be run alone (argv[1]):
 *  log       an app name with "\n<0>" cannot forge a journal line;
 *  app       every request naming an app refuses a name over 200 bytes
 *            instead of using the app named by its first 200;
 *  hello     connections that never say Hello are closed after
 *            --hello-timeout, and free their --max-connections slots;
 *  snapshot  a PutSnapshot listing more than 2^16 hashes is refused;
 *  clock     a wall-clock step does not drop a connection mid-frame;
 *  backlog   a burst of 300 connections while the daemon is not accepting
 *            all get in (listen backlog SOMAXCONN, not 128). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "proto/frame.h"
#include "rel_util.h"
#include "test.h"

static test_env env;
static pcache__devkey key;

static char *read_log(void) {
  FILE *f = fopen(env.log_path, "r");
  char *text = calloc(1, 1 << 22);
  ASSERT_TRUE(f != NULL);
  text[fread(text, 1, (1 << 22) - 1, f)] = '\0';
  fclose(f);
  return text;
}

static void log_escape(void) {
  wire_reply rep;
  char *log;
  int fd;
  test_daemon_start(&env, NULL);
  /* Hello is logged at debug level, which the harness runs at. */
  fd = wire_open(&env, "game\n<0>pcached: forged emergency\r\x1b[2J");
  wire_stats(fd, &rep);
  wire_reply_free(&rep);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
  log = read_log();
  ASSERT_TRUE(strstr(log, "\n<0>") == NULL);
  ASSERT_TRUE(strstr(log, "\r") == NULL);
  ASSERT_TRUE(strstr(log, "\x1b") == NULL);
  ASSERT_TRUE(strstr(log, "game\\x0a<0>pcached: forged emergency\\x0d\\x1b[2J") != NULL);
  free(log);
}

/* A request naming app (every kind that names one); returns its status. */
static int with_app(int fd, int kind, const char *app) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
  Pcachepb__Report rp = PCACHEPB__REPORT__INIT;
  Pcachepb__Purge pg = PCACHEPB__PURGE__INIT;
  Pcachepb__List ls = PCACHEPB__LIST__INIT;
  Pcachepb__Export ex = PCACHEPB__EXPORT__INIT;
  Pcachepb__Put put = PCACHEPB__PUT__INIT;
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  ProtobufCBinaryData k = {32, key.bytes};
  wire_reply rep;
  int st;
  dev.key = k;
  switch (kind) {
  case 0:
    pf.device_key = k;
    pf.app = (char *)app;
    req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
    req.prefetch = &pf;
    break;
  case 1:
    rp.device_key = k;
    rp.app = (char *)app;
    rp.snapshot = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
    req.body_case = PCACHEPB__REQUEST__BODY_REPORT;
    req.report = &rp;
    break;
  case 2:
    pg.selector_case = PCACHEPB__PURGE__SELECTOR_APP;
    pg.app = (char *)app;
    req.body_case = PCACHEPB__REQUEST__BODY_PURGE;
    req.purge = &pg;
    break;
  case 3:
    ls.app = (char *)app;
    ls.entries = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_LIST;
    req.list = &ls;
    break;
  case 4:
    ex.app = (char *)app;
    req.body_case = PCACHEPB__REQUEST__BODY_EXPORT;
    req.export = &ex;
    break;
  default:
    put.device = &dev;
    put.app = (char *)app;
    req.body_case = PCACHEPB__REQUEST__BODY_PUT;
    req.put = &put;
    break;
  }
  wire_call(fd, &req, &rep);
  st = rep.resp->status;
  if (kind == 0 && st == 0)
    ASSERT_EQ(rep.resp->prefetch->n_blobs, 0);
  wire_reply_free(&rep);
  return st;
}

static void app_length(void) {
  char app[205];
  wire_item it;
  wire_reply rep;
  uint64_t entries;
  int fd;
  test_daemon_start(&env, NULL);
  memset(app, 'a', 204);
  app[204] = '\0';
  app[200] = '\0';
  fd = wire_open(&env, app); /* 200 bytes: the longest name */
  wire_item_make(&it, &key, 1, 1000);
  wire_put(fd, &key, &it, 1, &rep);
  ASSERT_EQ(rep.resp->put->stored, 1);
  wire_reply_free(&rep);
  app[200] = 'b';
  for (int kind = 0; kind < 6; kind++)
    ASSERT_EQ(with_app(fd, kind, app), PCACHE_EBAD_SIZE);
  rel_stats(fd, &entries, NULL, NULL, NULL);
  ASSERT_EQ(entries, 1); /* nothing purged or dropped */
  app[200] = '\0';
  ASSERT_EQ(with_app(fd, 3, app), 0);
  wire_item_free(&it);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

static void hello_timeout(void) {
  const char *args[] = {"--hello-timeout", "1", "--max-connections", "3", NULL};
  int silent[3], fd;
  wire_reply rep;
  int timed_out = 0;
  test_daemon_start(&env, args);
  /* The harness's readiness probe may still hold a slot for a moment. */
  usleep(300 * 1000);
  for (int i = 0; i < 3; i++)
    ASSERT_GE(silent[i] = test_raw_connect(&env), 0);
  /* They hold every slot, then are closed without a reply. */
  for (int i = 0; i < 3; i++) {
    int st = wire_closed_with(silent[i]);
    ASSERT_TRUE(st == 0 || st == PCACHE_ETOO_MANY_CONNECTIONS);
    timed_out += st == 0;
  }
  ASSERT_GE(timed_out, 2);
  fd = wire_open(&env, "after");
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
  /* A client past Hello is not subject to it. */
  ASSERT_TRUE(rel_still_open(fd, 2000));
  wire_stats(fd, &rep);
  ASSERT_EQ(rep.resp->status, 0);
  wire_reply_free(&rep);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

static int put_snapshot_hashes(int fd, size_t n) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__PutSnapshot ps = PCACHEPB__PUT_SNAPSHOT__INIT;
  Pcachepb__DeviceInfo dev = PCACHEPB__DEVICE_INFO__INIT;
  ProtobufCBinaryData *h = calloc(n, sizeof *h);
  uint8_t *hashes = calloc(n, 16);
  uint8_t *blob = wire_blob(&key, 4096, 7);
  wire_reply rep;
  int st;
  for (size_t i = 0; i < n; i++) {
    memcpy(hashes + i * 16, &i, sizeof i);
    h[i] = (ProtobufCBinaryData){16, hashes + i * 16};
  }
  dev.key = (ProtobufCBinaryData){32, key.bytes};
  ps.device = &dev;
  ps.blob = (ProtobufCBinaryData){4096, blob};
  ps.state_hashes = h;
  ps.n_state_hashes = n;
  req.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
  req.put_snapshot = &ps;
  wire_call(fd, &req, &rep);
  st = rep.resp->status;
  wire_reply_free(&rep);
  free(h);
  free(hashes);
  free(blob);
  return st;
}

static void snapshot_hashes(void) {
  int fd;
  test_daemon_start(&env, NULL);
  fd = wire_open(&env, "snap");
  ASSERT_EQ(put_snapshot_hashes(fd, (1u << 16) + 1), PCACHE_ETOO_MANY_HASHES);
  ASSERT_EQ(put_snapshot_hashes(fd, 1u << 16), 0);
  {
    /* Reported, not asserted: a Prefetch that loads the largest list. */
    Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
    Pcachepb__Prefetch pf = PCACHEPB__PREFETCH__INIT;
    wire_reply rep;
    uint64_t t0 = rel_now_ms();
    pf.device_key = (ProtobufCBinaryData){32, key.bytes};
    pf.snapshot = 1;
    req.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
    req.prefetch = &pf;
    wire_call(fd, &req, &rep);
    ASSERT_EQ(rep.resp->status, 0);
    rel_figure("prefetch_snapshot_65536_hashes_ms", "%llu",
               (unsigned long long)(rel_now_ms() - t0));
    wire_reply_free(&rep);
  }
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

static void clock_step(void) {
  const char *args[] = {"--frame-timeout", "10", NULL};
  char step[400];
  wire_reply rep;
  uint8_t *frame;
  size_t size;
  int fd;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Stats st = PCACHEPB__STATS__INIT;
  snprintf(step, sizeof step, "%s/clock-stepped", env.root);
  setenv("PCACHE_TEST_CLOCK_STEP", step, 1);
  test_daemon_start_preloaded(&env, PCACHE_TEST_CLOCK_SHIM, args);
  fd = wire_open(&env, "clock");
  req.body_case = PCACHEPB__REQUEST__BODY_STATS;
  req.stats = &st;
  ASSERT_OK(pcache__request_encode(&req, UINT32_MAX, &frame, &size));
  /* Half a frame, then the wall clock jumps an hour, then two sweeps. */
  ASSERT_OK(wire_send_raw(fd, frame, 3));
  usleep(200 * 1000);
  close(open(step, O_CREAT | O_WRONLY, 0600));
  ASSERT_TRUE(rel_still_open(fd, 1500));
  ASSERT_OK(wire_send_raw(fd, frame + 3, size - 3));
  ASSERT_OK(wire_recv(fd, &rep));
  ASSERT_EQ(rep.resp->status, 0);
  /* Uptime is an interval: the step does not add an hour to it. */
  ASSERT_LT(rep.resp->stats->uptime_s, 600);
  wire_reply_free(&rep);
  free(frame);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
  unlink(step);
  unsetenv("PCACHE_TEST_CLOCK_STEP");
}

static void backlog(void) {
  enum { BURST = 300 };
  struct sockaddr_un sun = {.sun_family = AF_UNIX};
  int fds[BURST], refused = 0, fd;
  wire_reply rep;
  /* Room for the whole burst, so the client after it is never refused
   * while the daemon is still reaping the burst's closed sockets. */
  const char *args[] = {"--max-connections", "1000", NULL};
  test_daemon_start(&env, args);
  ASSERT_LT(strlen(env.socket_path), sizeof sun.sun_path);
  memcpy(sun.sun_path, env.socket_path, strlen(env.socket_path) + 1);
  test_daemon_pause(&env);
  for (int i = 0; i < BURST; i++) {
    fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(fds[i], 0);
    if (connect(fds[i], (struct sockaddr *)&sun, sizeof sun) < 0)
      refused++;
  }
  kill(env.daemon_pid, SIGCONT);
  rel_figure("listen_burst_refused", "%d of %d", refused, BURST);
  fprintf(stderr, "%d of %d connections refused while the daemon was stopped\n", refused, BURST);
  for (int i = 0; i < BURST; i++)
    close(fds[i]);
  ASSERT_EQ(refused, 0);
  fd = wire_open(&env, "after-burst");
  wire_stats(fd, &rep);
  wire_reply_free(&rep);
  close(fd);
  test_daemon_stop(&env, SIGTERM);
}

int main(int argc, char **argv) {
  test_env_init(&env, "rel-hardening");
  wire_guard(&env);
  wire_devkey(13, &key);
  if (rel_part_wanted(argc, argv, "log"))
    log_escape();
  if (rel_part_wanted(argc, argv, "app"))
    app_length();
  if (rel_part_wanted(argc, argv, "hello"))
    hello_timeout();
  if (rel_part_wanted(argc, argv, "snapshot"))
    snapshot_hashes();
  if (rel_part_wanted(argc, argv, "clock"))
    clock_step();
  if (rel_part_wanted(argc, argv, "backlog"))
    backlog();
  test_env_cleanup(&env);
  return 0;
}
