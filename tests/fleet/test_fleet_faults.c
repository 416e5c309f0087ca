/* The fleet tier against a real redis-server, through the wire protocol:
 * entries a daemon stores are pushed; another daemon with an empty store
 * serves them from the fleet; damaged, misfiled and invalid values are
 * refused and counted; Redis killed, stopped (SIGSTOP), speaking garbage,
 * or asking for a password: the daemon keeps serving from its own store,
 * answers within the client's deadline, and reconnects when Redis is
 * back. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/bytes.h"
#include "common/clock.h"
#include "common/hash.h"
#include "proto/rpc.h"
#include "fleet_wire.h"
#include "redis_util.h"
#include "remote_trust.h"
#include "test.h"
#include "wire.h"

#define N_ITEMS 4

/* A Get of items on a fresh connection within deadline_ms (the client's
 * own timeout): asserts the daemon answered in time; returns how many
 * blobs came back. */
static size_t get_within(const test_env *env, const pcache__devkey *key, wire_item *items, size_t n,
                         uint32_t deadline_ms) {
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  ProtobufCBinaryData hashes[N_ITEMS];
  pcache__reply reply = {0};
  int fd = wire_open(env, "fleet");
  size_t got;
  for (size_t i = 0; i < n; i++)
    hashes[i] = (ProtobufCBinaryData){PCACHE_HASH_SIZE, items[i].hash.bytes};
  get.device_key.data = (uint8_t *)key->bytes;
  get.device_key.len = PCACHE_DEVKEY_SIZE;
  get.state_hashes = hashes;
  get.n_state_hashes = n;
  req.body_case = PCACHEPB__REQUEST__BODY_GET;
  req.get = &get;
  ASSERT_OK(pcache__rpc(fd, &req, PCACHEPB__RESPONSE__BODY_GET, PCACHE_DEFAULT_MAX_FRAME,
                        pcache__mono_ms() + deadline_ms, &reply));
  got = reply.response->get->n_blobs;
  pcache__reply_release(&reply);
  close(fd);
  return got;
}

/* The fleet's keys: A's and B's, and a trusted-keys file listing both
 * (docs/fleet.md "Who can do what"). */
static test_fleet_key key_a, key_b;
static char trusted_ab[400];

/* A member that signs with key (NULL: reads only) and trusts A and B. */
static void start_signed(test_env *env, const char *name, const char *url, const char *auth,
                         const test_fleet_key *key) {
  const char *args[16] = {"--remote",  url, "--remote-timeout",      "100",
                          "--threads", "2", "--remote-trusted-keys", trusted_ab};
  int n = 8;
  if (auth)
    args[n++] = "--remote-auth", args[n++] = auth;
  if (key)
    args[n++] = "--remote-signing-key", args[n++] = key->key;
  test_env_init(env, name);
  test_daemon_start(env, args);
}

static void start_with(test_env *env, const char *name, const char *url, const char *auth) {
  start_signed(env, name, url, auth, &key_b);
}

/* Signs value as key's writer would for the Redis key k (the signature
 * covers the key less the prefix): what a trusted writer could push, to
 * reach the checks behind the signature. */
static void sign_as(const test_fleet_key *key, const char *k, uint8_t *value, size_t size) {
  pcd_trust t;
  ASSERT_EQ(pcd_trust_load(&t, key->key, NULL), 0);
  pcd_trust_sign(&t, k + strlen("pcache:"), strlen(k) - strlen("pcache:"), value, size);
  pcd_trust_clear(&t);
}

/* Damages three of the four values in three ways: a flipped bit (the
 * checksum catches it), another entry's value (the wrong Put), a
 * description changed under a recomputed checksum (the writer's own
 * check, as for an upload, refuses it). The last two are signed again by
 * A, as a writer that made such values would have signed them: the
 * checks behind the signature are under test here (test_fleet_trust.c
 * tests the signature). */
static void damage(redisContext *c, const pcache__devkey *key, wire_item *items) {
  redisReply *v = redis_get(c, fleet_entry_key(key->bytes, items[0].hash.bytes));
  v->str[v->len / 2] ^= 0x10;
  redis_set(c, fleet_entry_key(key->bytes, items[0].hash.bytes), v->str, v->len);
  freeReplyObject(v);

  v = redis_get(c, fleet_entry_key(key->bytes, items[3].hash.bytes));
  sign_as(&key_a, fleet_entry_key(key->bytes, items[1].hash.bytes), (uint8_t *)v->str, v->len);
  redis_set(c, fleet_entry_key(key->bytes, items[1].hash.bytes), v->str, v->len);
  freeReplyObject(v);

  v = redis_get(c, fleet_entry_key(key->bytes, items[2].hash.bytes));
  uint8_t *desc = memmem(v->str, v->len, items[2].item.desc.data, items[2].item.desc.len);
  ASSERT_TRUE(desc != NULL);
  desc[items[2].item.desc.len - 1] ^= 0x01;
  pcache__put_le64(
      (uint8_t *)v->str + PCD_FLEET_CHECKSUM_AT,
      pcache__checksum64((uint8_t *)v->str + PCD_FLEET_HEADER, v->len - PCD_FLEET_HEADER));
  sign_as(&key_a, fleet_entry_key(key->bytes, items[2].hash.bytes), (uint8_t *)v->str, v->len);
  redis_set(c, fleet_entry_key(key->bytes, items[2].hash.bytes), v->str, v->len);
  freeReplyObject(v);
}

/* A socket listening (backlog) on a free loopback port: the fake Redis
 * servers' below; url gets its redis:// address. */
static int listen_loopback(int backlog, char url[64]) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
  ASSERT_EQ(getsockname(fd, (struct sockaddr *)&a, &len), 0);
  ASSERT_EQ(listen(fd, backlog), 0);
  snprintf(url, 64, "redis://127.0.0.1:%d", ntohs(a.sin_port));
  return fd;
}

/* ------------------------------------------------------------- garbage */

static int garbage_fd;

/* Accepts and answers anything with bytes that are no RESP. */
static void *garbage_server(void *arg) {
  (void)arg;
  for (;;) {
    int c = accept(garbage_fd, NULL, NULL);
    char buf[256];
    if (c < 0)
      return NULL;
    (void)!read(c, buf, sizeof buf);
    (void)!write(c, "%%%% not redis %%%%\r\n", 20);
    fleet_sleep_ms(50);
    close(c);
  }
}

static void garbage_case(void) {
  pthread_t t;
  test_env env;
  pcache__devkey key;
  wire_item it;
  wire_reply r;
  char url[64];
  int fd;
  garbage_fd = listen_loopback(8, url);
  ASSERT_EQ(pthread_create(&t, NULL, garbage_server, NULL), 0);
  start_with(&env, "fleet-garbage", url, NULL);
  wire_guard(&env);
  fleet_sleep_ms(300);
  remote_view v = fleet_view(&env, "fleet");
  ASSERT_TRUE(strcmp(v.state, "up") != 0);
  ASSERT_GE(v.reconnects, 1);
  /* Serving goes on from the store alone, at once. */
  wire_devkey(7, &key);
  wire_item_make(&it, &key, 1, 4096);
  fd = wire_open(&env, "fleet");
  wire_put(fd, &key, &it, 1, &r);
  ASSERT_EQ(r.resp->put->stored, 1);
  wire_reply_free(&r);
  close(fd);
  ASSERT_EQ(get_within(&env, &key, &it, 1, 1000), 1);
  wire_item_free(&it);
  test_env_cleanup(&env);
  shutdown(garbage_fd, SHUT_RDWR);
  close(garbage_fd);
  pthread_join(t, NULL);
}

/* -------------------------------------------------- PONG, then garbage */

static int pong_fd;
static _Atomic int pong_accepted;

/* Answers PING with PONG and, in the same write, bytes that are no RESP:
 * a server that passes the handshake and then misbehaves. */
static void *pong_server(void *arg) {
  (void)arg;
  for (;;) {
    int c = accept(pong_fd, NULL, NULL);
    char buf[256];
    ssize_t n;
    if (c < 0)
      return NULL;
    atomic_fetch_add(&pong_accepted, 1);
    while ((n = read(c, buf, sizeof buf - 1)) > 0) {
      buf[n] = 0;
      if (strstr(buf, "PING")) {
        static const char reply[] = "+PONG\r\n%%%% not redis %%%%\r\n";
        (void)!write(c, reply, sizeof reply - 1);
        break;
      }
    }
    fleet_sleep_ms(20);
    close(c);
  }
}

/* A server that answers PING and then sends garbage: the pause between
 * tries keeps doubling, since no connection ever did any work (answering
 * PING is not work), and the log says so once. Reconnecting at once after
 * each PONG made 331 connections in 45 s. */
static void pong_garbage_case(void) {
  pthread_t t;
  test_env env;
  char url[64];
  remote_view v;
  pong_fd = listen_loopback(64, url);
  ASSERT_EQ(pthread_create(&t, NULL, pong_server, NULL), 0);
  start_with(&env, "fleet-pong", url, NULL);
  wire_guard(&env);
  /* 100 + 200 + 400 + 800 + 1600 ms: five or six tries in 3.5 s, where a
   * pause reset at each PONG makes one every 100 ms (over 30). */
  fleet_sleep_ms(3500);
  v = fleet_view(&env, "fleet");
  fprintf(stderr, "pong-garbage: %d connections, %llu reconnects in 3.5 s\n",
          atomic_load(&pong_accepted), (unsigned long long)v.reconnects);
  ASSERT_GE(v.reconnects, 3);
  ASSERT_LE(v.reconnects, 8);
  ASSERT_LE(atomic_load(&pong_accepted), 8);
  ASSERT_EQ(fleet_log_count(&env, "before any fetch or write was answered"), 1);
  ASSERT_LE(fleet_log_count(&env, "remote:"), 8);
  test_env_cleanup(&env);
  shutdown(pong_fd, SHUT_RDWR);
  close(pong_fd);
  pthread_join(t, NULL);
}

/* ------------------------------------------------------- a FIFO as AUTH */

/* --remote-auth naming a FIFO (no one writes to it): pcached refuses it
 * at once, saying it is no regular file, instead of blocking forever in
 * open() with its socket bound. A run still going after 5 s is sent
 * SIGTERM, and must end on it. */
static void fifo_case(const char *root) {
  test_env env;
  char fifo[400], out[4096];
  int status = 0, lf;
  ssize_t got;
  pid_t pid;
  test_env_init(&env, "fleet-fifo");
  snprintf(fifo, sizeof fifo, "%s/auth-fifo", root);
  ASSERT_EQ(mkfifo(fifo, 0600), 0);
  pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int fd = open(env.log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    execl(test_pcached_path(), "pcached", "--socket", env.socket_path, "--data-dir", env.data_dir,
          "--remote", "redis://127.0.0.1:1", "--remote-auth", fifo, (char *)NULL);
    _exit(127);
  }
  int ended = 0;
  for (int i = 0; i < 500 && !ended; i++) {
    ended = waitpid(pid, &status, WNOHANG) == pid;
    if (!ended)
      fleet_sleep_ms(10);
  }
  if (!ended) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 200 && !ended; i++) {
      ended = waitpid(pid, &status, WNOHANG) == pid;
      if (!ended)
        fleet_sleep_ms(10);
    }
    if (!ended) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    test_dump_daemon_log(&env);
    TEST_FAIL_("pcached with a FIFO as --remote-auth was still running after 5 s (%s)",
               ended ? "SIGTERM ended it" : "not even SIGTERM ended it");
  }
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_NE(WEXITSTATUS(status), 0);
  lf = open(env.log_path, O_RDONLY);
  ASSERT_GE(lf, 0);
  got = read(lf, out, sizeof out - 1);
  out[got > 0 ? got : 0] = 0;
  close(lf);
  ASSERT_TRUE(strstr(out, "--remote-auth") != NULL);
  ASSERT_TRUE(strstr(out, "not a regular file") != NULL);
  ASSERT_TRUE(strstr(out, "FIFO") != NULL);
  /* It left no socket behind that clients would find. */
  ASSERT_NE(access(env.socket_path, F_OK), 0);
  unlink(fifo);
  test_env_cleanup(&env);
}

/* ---------------------------------------------------------- huge reply */

static int huge_fd;
static _Atomic uint64_t huge_sent;

/* Answers PING, then answers anything else with one bulk string it says
 * is 1 GiB long and streams it (up to 512 MiB) as fast as it is taken. */
static void *huge_server(void *arg) {
  static char zeros[1 << 16];
  (void)arg;
  for (;;) {
    int c = accept(huge_fd, NULL, NULL);
    char buf[4096];
    ssize_t n;
    if (c < 0)
      return NULL;
    while ((n = read(c, buf, sizeof buf - 1)) > 0) {
      buf[n] = 0;
      if (strstr(buf, "PING")) {
        (void)!write(c, "+PONG\r\n", 7);
        continue;
      }
      if (write(c, "$1073741824\r\n", 14) != 14)
        break;
      for (uint64_t sent = 0; sent < (512u << 20);) {
        ssize_t w = send(c, zeros, sizeof zeros, MSG_NOSIGNAL);
        if (w <= 0)
          break;
        sent += (uint64_t)w;
        atomic_fetch_add(&huge_sent, (uint64_t)w);
      }
      break;
    }
    close(c);
  }
}

/* The peak resident memory of pid, in KiB (VmHWM). */
static uint64_t peak_kib(pid_t pid) {
  char path[64], line[256];
  uint64_t kib = 0;
  FILE *f;
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  f = fopen(path, "r");
  ASSERT_TRUE(f != NULL);
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmHWM: %llu kB", (unsigned long long *)&kib) == 1)
      break;
  fclose(f);
  return kib;
}

/* A Redis whose reply never ends: pcached holds no more of it than the
 * bound (two frames and 1 MiB; 3 MiB here with --max-frame 1 MiB), drops
 * the connection saying why, and goes on serving from its store. */
static void huge_case(void) {
  const char *args[] = {"--remote",    NULL,      "--remote-timeout",      "2000",
                        "--max-frame", "1048576", "--remote-trusted-keys", trusted_ab,
                        NULL};
  pthread_t t;
  test_env env;
  pcache__devkey key;
  wire_item it;
  char url[64];
  remote_view v;
  huge_fd = listen_loopback(8, url);
  ASSERT_EQ(pthread_create(&t, NULL, huge_server, NULL), 0);
  args[1] = url;
  test_env_init(&env, "fleet-huge");
  test_daemon_start(&env, args);
  fleet_wait_state(&env, "fleet", "up");
  wire_devkey(8, &key);
  wire_item_make(&it, &key, 1, 4096);
  /* The miss asks the fleet, which answers without end. */
  ASSERT_EQ(get_within(&env, &key, &it, 1, 5000), 0);
  for (int i = 0; i < 500 && fleet_view(&env, "fleet").reconnects == 0; i++)
    fleet_sleep_ms(10);
  v = fleet_view(&env, "fleet");
  ASSERT_GE(v.reconnects, 1);
  ASSERT_TRUE(strstr(v.last_error, "bound") != NULL);
  /* It took in no more than the bound and some slack, though it was sent
   * far more. */
  ASSERT_LT(peak_kib(env.daemon_pid), 96u * 1024u);
  fprintf(stderr, "huge: the server sent %llu MiB; pcached's peak %llu KiB\n",
          (unsigned long long)(atomic_load(&huge_sent) >> 20),
          (unsigned long long)peak_kib(env.daemon_pid));
  wire_item_free(&it);
  test_env_cleanup(&env);
  shutdown(huge_fd, SHUT_RDWR);
  close(huge_fd);
  pthread_join(t, NULL);
}

/* ---------------------------------------------------------------- AUTH */

static void auth_case(const char *root) {
  test_redis rs = {0};
  test_env env;
  char dir[400], file[400];
  int fd;
  snprintf(rs.password, sizeof rs.password, "s3cret-fleet");
  snprintf(dir, sizeof dir, "%s/redis-auth", root);
  redis_start(&rs, dir);
  snprintf(file, sizeof file, "%s/auth", root);

  /* A password file others may read is refused: pcached does not start. */
  fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_EQ(write(fd, "s3cret-fleet\n", 13), 13);
  close(fd);
  chmod(file, 0644);
  {
    test_env e;
    char out[4096];
    const char *args[] = {"--socket", "/nonexistent/x", "--remote", rs.url, "--remote-auth",
                          file,       "--idle-exit",    "1",        NULL};
    test_env_init(&e, "fleet-authmode");
    ASSERT_NE(test_pcached_run(&e, args, out, sizeof out), 0);
    ASSERT_TRUE(strstr(out, "--remote-auth") != NULL);
    test_env_cleanup(&e);
  }
  /* The wrong password: never up, and the reason is shown. */
  fd = open(file, O_WRONLY | O_TRUNC);
  ASSERT_EQ(write(fd, "wrong\n", 6), 6);
  close(fd);
  chmod(file, 0600);
  start_with(&env, "fleet-authbad", rs.url, file);
  wire_guard(&env);
  for (int i = 0; i < 500 && !fleet_view(&env, "fleet").reconnects; i++)
    fleet_sleep_ms(10);
  remote_view v = fleet_view(&env, "fleet");
  ASSERT_TRUE(strcmp(v.state, "up") != 0);
  ASSERT_TRUE(strstr(v.last_error, "AUTH") != NULL);
  test_env_cleanup(&env);

  /* The right one, as user "default" on a second line: up, and pushing. */
  fd = open(file, O_WRONLY | O_TRUNC);
  ASSERT_EQ(write(fd, "default\ns3cret-fleet\n", 21), 21);
  close(fd);
  start_with(&env, "fleet-auth", rs.url, file);
  wire_guard(&env);
  fleet_wait_state(&env, "fleet", "up");
  {
    pcache__devkey key;
    wire_item it;
    wire_reply r;
    wire_devkey(9, &key);
    wire_item_make(&it, &key, 5, 2048);
    fd = wire_open(&env, "fleet");
    wire_put(fd, &key, &it, 1, &r);
    wire_reply_free(&r);
    close(fd);
    fleet_wait_pushed(&env, "fleet", 1);
    wire_item_free(&it);
  }
  test_env_cleanup(&env);
  redis_kill(&rs);
}

int main(void) {
  test_redis rs = {0};
  test_env a, b;
  pcache__devkey key;
  wire_item items[N_ITEMS], more;
  wire_reply r;
  redisContext *c;
  char dir[400];
  int fd;

  redis_require();
  signal(SIGPIPE, SIG_IGN);
  test_env_init(&a, "fleet-root");
  snprintf(dir, sizeof dir, "%s/redis", a.root);
  redis_start(&rs, dir);
  {
    char kdir[400];
    snprintf(kdir, sizeof kdir, "%s/keys-a", a.root);
    fleet_keygen(&key_a, kdir);
    snprintf(kdir, sizeof kdir, "%s/keys-b", a.root);
    fleet_keygen(&key_b, kdir);
    snprintf(trusted_ab, sizeof trusted_ab, "%s/trusted", a.root);
    const test_fleet_key both[2] = {key_a, key_b};
    fleet_trust_file(trusted_ab, both, 2);
  }
  start_signed(&a, "fleet-a", rs.url, NULL, &key_a);
  wire_guard(&a);
  fleet_wait_state(&a, "fleet", "up");

  /* A stores four entries: each is pushed, with its app's index. */
  wire_devkey(3, &key);
  for (int i = 0; i < N_ITEMS; i++)
    wire_item_make(&items[i], &key, 100 + (unsigned)i, 8192);
  fd = wire_open(&a, "fleet");
  wire_put(fd, &key, items, N_ITEMS, &r);
  ASSERT_EQ(r.resp->put->stored, N_ITEMS);
  wire_reply_free(&r);
  close(fd);
  fleet_wait_pushed(&a, "fleet", N_ITEMS);
  c = redis_connect(&rs);
  ASSERT_EQ(redis_count_keys(c, "pcache:e:*"), N_ITEMS);
  ASSERT_EQ(redis_count_keys(c, "pcache:a:*"), 1);

  /* B, empty, serves an intact entry from the fleet: asked, stored, then
   * a local hit. */
  start_with(&b, "fleet-b", rs.url, NULL);
  wire_guard(&b);
  fleet_wait_state(&b, "fleet", "up");
  ASSERT_EQ(get_within(&b, &key, &items[3], 1, 5000), 1);
  remote_view v = fleet_view(&b, "fleet");
  ASSERT_EQ(v.stored, 1);
  ASSERT_EQ(v.entries, 1);
  ASSERT_EQ(v.pushed, 0); /* never pushed back */

  /* Damaged values are refused, each counted, none stored or served. */
  damage(c, &key, items);
  ASSERT_EQ(get_within(&b, &key, items, N_ITEMS, 5000), 1); /* items[3], local now */
  v = fleet_view(&b, "fleet");
  ASSERT_EQ(v.refused, 3);
  ASSERT_EQ(v.stored, 1);
  ASSERT_EQ(v.entries, 1);

  /* Redis stopped (SIGSTOP): answers come within the deadline; the
   * connection is dropped as stalled, then taken up again after SIGCONT. */
  wire_item_make(&more, &key, 999, 1024);
  kill(rs.pid, SIGSTOP);
  for (int i = 0; i < 5; i++)
    ASSERT_EQ(get_within(&b, &key, &more, 1, 1000), 0);
  fleet_wait_state(&b, "fleet", "down");
  ASSERT_EQ(get_within(&b, &key, &more, 1, 1000), 0);
  ASSERT_GE(fleet_view(&b, "fleet").skipped, 1);
  ASSERT_GE(fleet_view(&b, "fleet").timeouts, 1);
  kill(rs.pid, SIGCONT);
  fleet_wait_state(&b, "fleet", "up");

  /* Redis killed midway: B serves what it has and stores uploads; once
   * Redis is back (empty: it kept nothing), B reconnects and pushes. */
  redisFree(c);
  redis_kill(&rs);
  fleet_wait_state(&b, "fleet", "down");
  ASSERT_EQ(get_within(&b, &key, &items[3], 1, 1000), 1);
  ASSERT_EQ(get_within(&b, &key, &more, 1, 1000), 0);
  fd = wire_open(&b, "fleet");
  wire_put(fd, &key, &more, 1, &r);
  ASSERT_EQ(r.resp->put->stored, 1);
  wire_reply_free(&r);
  close(fd);
  redis_start(&rs, dir); /* the same port */
  fleet_wait_state(&b, "fleet", "up");
  ASSERT_GE(fleet_view(&b, "fleet").reconnects, 2);
  fd = wire_open(&b, "fleet");
  wire_item_free(&more);
  wire_item_make(&more, &key, 1000, 1024);
  wire_put(fd, &key, &more, 1, &r);
  wire_reply_free(&r);
  close(fd);
  fleet_wait_pushed(&b, "fleet", 1);

  for (int i = 0; i < N_ITEMS; i++)
    wire_item_free(&items[i]);
  wire_item_free(&more);
  ASSERT_EQ(test_daemon_stop(&b, SIGTERM) & 0x7f, 0);
  test_env_cleanup(&b);
  test_env_cleanup(&a);

  garbage_case();
  pong_garbage_case();
  huge_case();
  {
    test_env root;
    test_env_init(&root, "fleet-authroot");
    fifo_case(root.root);
    auth_case(root.root);
    test_env_cleanup(&root);
  }
  redis_kill(&rs);
  return 0;
}
